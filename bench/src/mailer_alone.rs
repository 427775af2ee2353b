//! The delivery bench's "mailer alone" phase: Mailroom's SMTP client (`SmtpMailer`, the
//! one the worker uses) sending prepared messages straight to `smtp-sink`, without the
//! database, the claim or the render, to a sink that offers `PIPELINING` (RFC 2920) and
//! to one that does not, in interleaved rounds.
//!
//! The whole-engine figures move by a fifth between runs on a shared machine; this phase
//! isolates what the SMTP client itself costs per message (CPU of the sending thread and
//! of `smtp-sink`) and compares the two ways of sending within one run, so slow drift of
//! the machine falls on both alike. Each message is built (MIME, encoding) inside the
//! send, as in the worker.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use futures_util::StreamExt;
use mailroom_app::ports::{Mailer, OutgoingMail};
use mailroom_smtp::{MailerSettings, SmtpMailer, SmtpPoolSettings};
use mailroom_test_support::loopback_mail;

use crate::cpu::{process_cpu, this_thread_cpu};
use crate::stats::thousands;

/// Rounds of each kind, interleaved (pipelined, stepwise, pipelined, …), after an
/// uncounted warm-up round of each.
const ROUNDS: usize = 3;

/// One round's figures.
struct Round {
    rate: f64,
    sender_us: f64,
    sink_us: f64,
}

/// Sends `count` messages of the delivery bench's size over `connections` sessions to each of
/// the two sinks (`pipelined` offers PIPELINING, `stepwise` does not; both are
/// `smtp-sink` processes with their pids), [`ROUNDS`] times, and prints the figures.
pub fn compare(
    pipelined: (u16, u32),
    stepwise: (u16, u32),
    count: u64,
    connections: usize,
) -> Result<()> {
    report!(
        "\n== The mailer alone (no database, no render): {} messages over {connections} connections, {ROUNDS} interleaved rounds each after a warm-up",
        thousands(count)
    );
    // A round of each kind first, not counted: the first round of a process ran up to a
    // third slower (page faults, allocator growth, the sink's first connections).
    for (port, _) in [pipelined, stepwise] {
        send_apart(port, count / 4, connections)?;
    }
    let mut results: [Vec<Round>; 2] = [Vec::new(), Vec::new()];
    for _ in 0..ROUNDS {
        for (index, (port, sink_pid)) in [pipelined, stepwise].into_iter().enumerate() {
            let sink_before = sink_cpu(sink_pid)?;
            let (elapsed, sender) = send_apart(port, count, connections)?;
            let sink = sink_cpu(sink_pid)?.saturating_sub(sink_before);
            let per_message = |cpu: Duration| cpu.as_secs_f64() * 1e6 / count as f64;
            results[index].push(Round {
                rate: count as f64 / elapsed.as_secs_f64(),
                sender_us: per_message(sender),
                sink_us: per_message(sink),
            });
        }
    }
    for (label, rounds) in ["PIPELINING", "one command at a time"].iter().zip(&results) {
        let list = |figure: fn(&Round) -> f64, decimals: usize| {
            rounds
                .iter()
                .map(|round| format!("{:.*}", decimals, figure(round)))
                .collect::<Vec<_>>()
                .join(" / ")
        };
        report!(
            "  {label:<22} {} messages/s; CPU per message: sender {} µs, smtp-sink {} µs",
            list(|round| round.rate, 0),
            list(|round| round.sender_us, 1),
            list(|round| round.sink_us, 1),
        );
    }
    let mean = |rounds: &[Round], figure: fn(&Round) -> f64| {
        rounds.iter().map(figure).sum::<f64>() / rounds.len() as f64
    };
    let [piped, stepped] = &results;
    report!(
        "  pipelined ÷ stepwise   rate {:.2}×, sender CPU {:.2}×, smtp-sink CPU {:.2}×",
        mean(piped, |round| round.rate) / mean(stepped, |round| round.rate),
        mean(piped, |round| round.sender_us) / mean(stepped, |round| round.sender_us),
        mean(piped, |round| round.sink_us) / mean(stepped, |round| round.sink_us),
    );
    Ok(())
}

fn sink_cpu(pid: u32) -> Result<Duration> {
    process_cpu(pid)
        .map(|cpu| cpu.own)
        .context("reading smtp-sink's CPU time")
}

/// [`send`] on a thread of its own (the caller runs inside the bench's runtime).
fn send_apart(port: u16, count: u64, connections: usize) -> Result<(Duration, Duration)> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| send(port, count, connections))
            .join()
            .map_err(|_| anyhow::anyhow!("the sending thread panicked"))
    })?
}

/// Sends `count` messages on this thread's own single-threaded runtime and returns the
/// elapsed time and this thread's CPU time.
fn send(port: u16, count: u64, connections: usize) -> Result<(Duration, Duration)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("the sending runtime")?;
    let mailer = SmtpMailer::new(MailerSettings {
        allow_private_egress: true,
        timeout: Duration::from_secs(30),
        pool: SmtpPoolSettings {
            max_connections: connections,
            ..SmtpPoolSettings::default()
        },
    });
    let mails: Vec<OutgoingMail> = (0..count).map(|n| mail(port, n)).collect();
    let cpu_before = this_thread_cpu().context("reading the thread's CPU time")?;
    let started = Instant::now();
    let failures = runtime.block_on(async {
        futures_util::stream::iter(&mails)
            .map(|mail| mailer.send(mail))
            .buffer_unordered(connections * 2)
            .filter(|result| std::future::ready(result.is_err()))
            .count()
            .await
    });
    let elapsed = started.elapsed();
    let cpu = this_thread_cpu()
        .context("reading the thread's CPU time")?
        .saturating_sub(cpu_before);
    if failures > 0 {
        bail!("{failures} of {count} messages were not accepted by smtp-sink");
    }
    Ok((elapsed, cpu))
}

/// The delivery bench's message as the worker would render it: the same HTML (about
/// [`crate::delivery::BODY_BYTES`] on one line), one recipient.
fn mail(port: u16, n: u64) -> OutgoingMail {
    let mut mail = loopback_mail(port, n);
    mail.rendered.html = format!(
        "<p>Hello reader{n},</p>{}",
        crate::delivery::filler_paragraphs()
    );
    mail
}
