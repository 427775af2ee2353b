//! Several real `mailroom` processes on one database, with the delivery of an announcement
//! under scale-out, SIGKILL and SIGTERM (docs/design.md#8-delivery and docs/design.md#12-scaling-out).
//!
//! Each test starts an API-only `mailroom serve` (MAILROOM_WORKERS=false) and worker-only
//! `mailroom worker` processes against a database of its own, imports contacts through
//! `POST …/contacts/import`, creates an announcement through the API, and judges the
//! outcome where it can be seen from outside: at the loopback SMTP test server (which
//! records every accepted message with its recipient and the EHLO name of the client) and
//! through the API (announcement status, message counts, daily stats).
//!
//! Each worker process is given its own EHLO name (`MAILROOM_SMTP_HELLO_NAME=worker-a`
//! …), an operator setting that exists anyway, so the SMTP server can tell which process
//! sent each message: that is how the tests know each worker's share. It is measured at the
//! receiving end, so it cannot over-report the way a worker's own log could.
//!
//! The tests print their figures (run with `--no-capture`, or see nextest's output).

mod support;

use std::time::{Duration, Instant};

use mailroom_server::message_worker::MAX_HELD;
use mailroom_test_support::TestSmtpOptions;
use rand::Rng as _;
use support::{count_from_env, describe, Deliveries, Deployment, MESSAGE_LEASE, SMTP_TIMEOUT};

/// The most messages one worker process can have in flight (claimed, maybe accepted by
/// the SMTP server, outcome not yet recorded): what it holds at most.
const IN_FLIGHT_PER_PROCESS: usize = MAX_HELD;

/// Scale-out: one API-only process and two worker-only processes on one database
/// deliver an announcement to 20,000 contacts (`MAILROOM_SCALE_OUT_CONTACTS` overrides).
///
/// Afterwards each contact received exactly one message (counted by recipient at the SMTP
/// server), the announcement is `completed` with its audience size, the stats count every
/// message once, and both workers did a share of the work: the SMTP server records the
/// EHLO name of the session that carried each message, and each worker process has its
/// own (`MAILROOM_SMTP_HELLO_NAME`). Each must have carried at least a tenth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_worker_processes_share_an_announcement_and_send_each_contact_one_message() {
    let contacts = count_from_env("MAILROOM_SCALE_OUT_CONTACTS", 20_000);
    let deployment = Deployment::start("scale_out", TestSmtpOptions::default()).await;
    let mut worker_a = deployment.start_worker("worker-a").await;
    let mut worker_b = deployment.start_worker("worker-b").await;
    deployment.import_contacts(contacts).await;

    let started = Instant::now();
    let id = deployment.announce().await;
    let announcement = deployment
        .wait_for_completion(
            &id,
            &mut [&mut worker_a, &mut worker_b],
            Duration::from_secs(600),
        )
        .await;
    let elapsed = started.elapsed();

    let deliveries = Deliveries::of(&deployment.smtp.messages());
    let share = |name: &str| deliveries.per_hello.get(name).copied().unwrap_or(0);
    let (a, b) = (share("worker-a"), share("worker-b"));
    println!(
        "scale-out: {contacts} contacts, {} messages in {:.1} s ({:.0} messages/s); worker-a sent {a} ({:.0} %), worker-b sent {b} ({:.0} %)",
        deliveries.total,
        elapsed.as_secs_f64(),
        deliveries.total as f64 / elapsed.as_secs_f64(),
        100.0 * a as f64 / deliveries.total.max(1) as f64,
        100.0 * b as f64 / deliveries.total.max(1) as f64,
    );

    deliveries.assert_every_contact_reached(contacts, true);
    assert_eq!(deliveries.total, contacts);
    assert_eq!(
        a + b,
        deliveries.total,
        "messages from unknown EHLO names: {:?}",
        deliveries.per_hello
    );
    for (name, sent) in [("worker-a", a), ("worker-b", b)] {
        assert!(
            sent * 10 >= contacts,
            "{name} sent only {sent} of {contacts} messages: the work was not shared"
        );
    }
    assert_eq!(announcement["audienceSize"], contacts, "{announcement}");
    assert!(
        announcement["processDate"].is_string(),
        "a completed announcement has a processDate: {announcement}"
    );
    deployment.assert_every_message_final().await;
    assert_eq!(deployment.message_count("sent").await, contacts as u64);
    assert_eq!(deployment.sent_today().await, contacts as u64);
}

/// Crash during an announcement: 10,000 contacts (`MAILROOM_CRASH_CONTACTS`
/// overrides), two worker processes, one of them SIGKILLed three times at random moments
/// (after a random 10–15 %, 40–45 % and 70–75 % of the messages arrived) and restarted
/// at once each time.
///
/// The SMTP server waits 50 ms before accepting each message, so the killed process has
/// messages in flight; a message it had sent but not yet recorded is sent again once its
/// lease (the default 30 s, renewed while a worker lives) runs out. After the last kill
/// the test measures how long until every message that was `sending` at the kill is
/// settled, prints it and requires at most 90 s (the killed worker's messages wait about
/// one lease). Afterwards: every contact
/// received the announcement; duplicates are at most the messages the killed process can
/// have had in flight ([`IN_FLIGHT_PER_PROCESS`] per kill) and at least those the server
/// still held for it right after each kill (accepted after it died, so never recorded
/// by it: the kills did hit work in flight); no message is left
/// `queued` or `sending`; every message is `sent`; the stats count each message once (so
/// `sent` equals the number of messages, and the SMTP server saw that many plus the
/// duplicates); and the announcement is `completed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_worker_three_times_loses_nothing_and_repeats_only_messages_in_flight() {
    let contacts = count_from_env("MAILROOM_CRASH_CONTACTS", 10_000);
    let deployment = Deployment::start(
        "crash",
        TestSmtpOptions {
            accept_delay: Some(Duration::from_millis(50)),
            ..TestSmtpOptions::default()
        },
    )
    .await;
    let mut victim = deployment.start_worker("worker-a").await;
    let mut survivor = deployment.start_worker("worker-b").await;
    deployment.import_contacts(contacts).await;

    let started = Instant::now();
    let id = deployment.announce().await;
    let moments: Vec<(f64, u64)> = {
        let mut rng = rand::thread_rng();
        // A pause after the threshold, so the kill does not fall on the instant a burst of
        // messages was accepted.
        [10.0, 40.0, 70.0]
            .map(|base| (base + rng.gen_range(0.0..5.0), rng.gen_range(0..50)))
            .to_vec()
    };
    let mut kills = Vec::new();
    let mut recovery = None;
    for (percent, pause) in moments {
        let threshold = (contacts as f64 * percent / 100.0) as usize;
        deployment
            .wait_for_deliveries(
                threshold,
                &mut [&mut victim, &mut survivor],
                Duration::from_secs(300),
            )
            .await;
        tokio::time::sleep(Duration::from_millis(pause)).await;
        victim.kill();
        let killed_at = Instant::now();
        // Read after the kill: each of these is accepted by the server after the victim
        // died, so the victim never recorded it, and it is sent again.
        let stranded = deployment.smtp.in_flight("worker-a");
        let at = deployment.smtp.message_count();
        kills.push((percent, at, stranded));
        // Everything `sending` now: the victim's messages (leased to a dead worker) and
        // the survivor's. Recovery ends when none of them is still `sending`. Measured
        // after the last kill only: waiting for it earlier would let the survivor finish
        // the announcement before the next kill.
        let last = kills.len() == 3;
        let sending = if last {
            deployment.message_ids("sending").await
        } else {
            Vec::new()
        };
        victim = deployment.start_worker("worker-a").await;
        if last {
            let recovered =
                wait_until_settled(&deployment, &sending, Duration::from_secs(180)).await;
            recovery = Some((sending.len(), recovered.duration_since(killed_at)));
        }
    }
    let (held_at_kill, recovery) = recovery.expect("measured after the last kill");
    println!(
        "crash: the {held_at_kill} messages `sending` at the last kill were all settled {:.1} s after it (lease {MESSAGE_LEASE:?}, renewed)",
        recovery.as_secs_f64()
    );
    assert!(held_at_kill > 0, "the last kill hit no message in flight");
    assert!(
        recovery <= Duration::from_secs(90),
        "a killed worker's messages must be delivered by another within 90 s, took {recovery:?}"
    );
    let announcement = deployment
        .wait_for_completion(
            &id,
            &mut [&mut victim, &mut survivor],
            Duration::from_secs(600),
        )
        .await;
    let elapsed = started.elapsed();

    let deliveries = Deliveries::of(&deployment.smtp.messages());
    let duplicates = deliveries.duplicates();
    let bound = kills.len() * IN_FLIGHT_PER_PROCESS;
    for (percent, at, stranded) in &kills {
        println!(
            "crash: SIGKILL after {percent:.1} % ({at} messages at the SMTP server; {stranded} of the killed worker's messages were waiting to be accepted)"
        );
    }
    let stranded: usize = kills.iter().map(|(_, _, stranded)| stranded).sum();
    println!(
        "crash: {contacts} contacts, {} SMTP deliveries in {:.1} s (lease {MESSAGE_LEASE:?}), {duplicates} duplicates (at least the {stranded} stranded at the SMTP server; at most {} kills × {IN_FLIGHT_PER_PROCESS} in flight = {bound}); per EHLO name: {:?}",
        deliveries.total,
        elapsed.as_secs_f64(),
        kills.len(),
        deliveries.per_hello
    );

    deliveries.assert_every_contact_reached(contacts, false);
    assert!(
        duplicates <= bound,
        "{duplicates} duplicates, more than the {bound} messages that can have been in flight"
    );
    assert!(
        duplicates >= stranded,
        "{duplicates} duplicates, fewer than the {stranded} messages the server accepted after their sender died"
    );
    deployment.assert_every_message_final().await;
    assert_eq!(
        deployment.message_count("sent").await,
        contacts as u64,
        "every message ends sent"
    );
    let sent_today = deployment.sent_today().await;
    assert_eq!(sent_today, contacts as u64, "stats count each message once");
    assert_eq!(
        deliveries.total as u64,
        sent_today + duplicates as u64,
        "the SMTP server saw each message once plus the duplicates"
    );
    assert_eq!(announcement["audienceSize"], contacts, "{announcement}");
}

/// Waits until none of `ids` is `sending` any more (the `sending` list read through the
/// API once a second, a few pages each time); returns when.
async fn wait_until_settled(deployment: &Deployment, ids: &[String], within: Duration) -> Instant {
    let deadline = Instant::now() + within;
    loop {
        let sending: std::collections::HashSet<String> = deployment
            .message_ids("sending")
            .await
            .into_iter()
            .collect();
        let pending = ids.iter().filter(|id| sending.contains(*id)).count();
        if pending == 0 {
            return Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "{pending} messages still `sending` {within:?} after the kill"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Graceful shutdown: SIGTERM to a worker process while it delivers. It
/// finishes the rounds in flight (each outcome recorded), stops claiming, and exits 0
/// within a bound (its sessions are bounded by three SMTP timeouts); the other worker
/// sends the rest. Nobody receives a message twice.
///
/// The SMTP server waits 200 ms before accepting each message, and the signal is sent
/// while it holds messages of the stopping worker: those are in flight. The server
/// accepts them whatever the client does, so had the worker not recorded them before
/// exiting, they would be sent again once their lease ran out: zero duplicates shows it
/// did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_a_worker_finish_its_messages_and_another_sends_the_rest() {
    let contacts = count_from_env("MAILROOM_SHUTDOWN_CONTACTS", 3_000);
    let deployment = Deployment::start(
        "shutdown",
        TestSmtpOptions {
            accept_delay: Some(Duration::from_millis(200)),
            ..TestSmtpOptions::default()
        },
    )
    .await;
    let mut stopping = deployment.start_worker("worker-a").await;
    let mut remaining = deployment.start_worker("worker-b").await;
    deployment.import_contacts(contacts).await;

    let id = deployment.announce().await;
    deployment
        .wait_for_deliveries(
            contacts * 3 / 10,
            &mut [&mut stopping, &mut remaining],
            Duration::from_secs(300),
        )
        .await;
    let from_a = |deployment: &Deployment| {
        Deliveries::of(&deployment.smtp.messages())
            .per_hello
            .get("worker-a")
            .copied()
            .unwrap_or(0)
    };
    // Signal while worker-a has messages in the server's accept delay: sessions in flight.
    // (With three overlapping rounds per process there may be no gap between bursts to
    // wait for; any message held in the delay is a session in flight.)
    let waiting = Instant::now();
    while deployment.smtp.in_flight("worker-a") == 0 {
        stopping.assert_running();
        assert!(
            waiting.elapsed() < Duration::from_secs(30),
            "worker-a had no message in flight for 30 s"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // Let the rest of the burst reach the server (well inside the 200 ms delay).
    tokio::time::sleep(Duration::from_millis(50)).await;
    let before_signal = from_a(&deployment);
    let in_flight = deployment.smtp.in_flight("worker-a");
    stopping.terminate();
    let signalled = Instant::now();
    let bound = SMTP_TIMEOUT * 3 + Duration::from_secs(10);
    let status = stopping.wait_exit(bound).await;
    let stop_time = signalled.elapsed();
    let after_exit = from_a(&deployment);
    assert_eq!(
        status.code(),
        Some(0),
        "worker-a stopped with {}; log:\n{}",
        describe(status),
        stopping.log()
    );
    assert!(
        stopping.log().contains("workers stopped"),
        "worker-a did not log a graceful stop; log:\n{}",
        stopping.log()
    );

    let announcement = deployment
        .wait_for_completion(&id, &mut [&mut remaining], Duration::from_secs(600))
        .await;
    let deliveries = Deliveries::of(&deployment.smtp.messages());
    println!(
        "shutdown: worker-a had sent {before_signal} at SIGTERM with {in_flight} waiting to be accepted, finished {} more and exited 0 in {:.2} s (bound {bound:?}); worker-b sent {} of {contacts}; duplicates {}",
        after_exit - before_signal,
        stop_time.as_secs_f64(),
        deliveries.per_hello.get("worker-b").copied().unwrap_or(0),
        deliveries.duplicates()
    );
    deliveries.assert_every_contact_reached(contacts, true);
    assert_eq!(deliveries.total, contacts, "no duplicates");
    assert_eq!(
        from_a(&deployment),
        after_exit,
        "worker-a sent nothing after it exited"
    );
    deployment.assert_every_message_final().await;
    assert_eq!(deployment.sent_today().await, contacts as u64);
    assert_eq!(announcement["audienceSize"], contacts, "{announcement}");
}

/// The knobs these tests turn are checked at start-up: a lease too short to renew, a zero
/// SMTP timeout, or an EHLO name that is not a host name, stops the
/// process with a message naming the variable.
#[tokio::test]
async fn a_lease_too_short_to_renew_or_a_bad_hello_name_stops_the_worker() {
    let database = mailroom_test_support::TestDatabase::create();
    let dir = support::ScratchDir::new("bad_knobs");
    for (variable, value, extra) in [
        (
            "MAILROOM_MESSAGE_LEASE",
            "2",
            ("MAILROOM_SMTP_TIMEOUT", "2"),
        ),
        ("MAILROOM_SMTP_TIMEOUT", "0", ("MAILROOM_LOG", "warn")),
        (
            "MAILROOM_SMTP_HELLO_NAME",
            "worker a\r\nMAIL FROM:<x@y>",
            ("MAILROOM_LOG", "warn"),
        ),
    ] {
        let mut command = support::mailroom_command(&dir, &database);
        // The helper sets a valid lease; only the case under test sets one here.
        command
            .env_remove("MAILROOM_MESSAGE_LEASE")
            .arg("worker")
            .env(extra.0, extra.1)
            .env(variable, value);
        // A worker that accepted the value would run on: `wait_exit` fails then.
        let mut worker = support::Process::spawn(variable, &dir, command);
        let status = worker.wait_exit(Duration::from_secs(30)).await;
        let log = worker.log();
        assert!(
            !status.success() && log.contains(variable),
            "{variable}={value:?}: expected a refusal naming the variable, got {} with log:\n{log}",
            describe(status)
        );
    }
}
