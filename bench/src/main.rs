//! `mailroom-bench`: benchmarks of the real server, run by `cargo xtask bench`.
//!
//! `mailroom-bench audience [--contacts N] [--seconds S]` starts the server in-process over
//! a fresh database (the maintenance URL comes from `DATABASE_URL`, as for the tests),
//! loads an audience through the import endpoint, and measures search, count and event
//! recording beside a reference: a flat table queried directly, and `pgbench` running the
//! statements the API runs. Every loop is bounded in count or time, and the only addresses
//! used are the server's on 127.0.0.1 and `DATABASE_URL`.

// First: the other modules print their reports with its `report!`.
#[macro_use]
mod durability;
mod announcement;
mod audience;
mod comparison;
mod conversion;
mod cpu;
mod data;
mod delivery;
mod events;
mod lanes;
mod mailer_alone;
mod stats;
mod wal;
mod webhooks;

use std::process::ExitCode;

const USAGE: &str = "\
Usage: mailroom-bench <audience|webhooks|announcement|delivery|conversion|lanes> [--unsafe-fast-db] [args...]
       mailroom-bench audience [--contacts N] [--seconds S] [--pool P] [--reuse]

  audience      import N contacts (default 1000000) through POST …/contacts/import,
                then time search, search count and POST …/events (S seconds per
                event run, default 30) beside a flat table and pgbench; the server
                holds at most P database connections (default: the server's own
                default, 16; the 32 clients queue for them as in production). With
                --reuse the generated database is kept (named by N and the
                migrations) and a later --reuse run with the same N skips the
                import and setup; drop it with DROP DATABASE when done.

DATABASE_URL must name a PostgreSQL maintenance database (as for the tests); the
benchmark creates its own database there and drops it at the end. Its server must
run with production durability (fsync, synchronous_commit and full_page_writes on;
read with SHOW and printed first): --unsafe-fast-db measures a server without it
anyway, and every line printed then starts with `[NOT DURABLE]`.
";

/// What to run, from the command line.
pub struct Options {
    /// Contacts to import.
    pub contacts: u64,
    /// Duration of each event-recording run, in seconds.
    pub seconds: u64,
    /// The server's database pool size; `None` keeps the server's default.
    pub pool: Option<u32>,
    /// Keep the generated database, and use a kept one when it matches.
    pub reuse: bool,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let (command, rest) = args.split_first().ok_or("no benchmark named")?;
    if command != "audience" {
        return Err(format!("unknown benchmark `{command}`"));
    }
    let mut options = Options {
        contacts: 1_000_000,
        seconds: 30,
        pool: None,
        reuse: false,
    };
    let mut rest = rest.iter();
    while let Some(flag) = rest.next() {
        if flag == "--reuse" {
            options.reuse = true;
            continue;
        }
        let value = rest.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number: u64 = value
            .parse()
            .map_err(|_| format!("{flag} needs a whole number, got `{value}`"))?;
        match flag.as_str() {
            "--contacts" if number >= 1_000 => options.contacts = number,
            "--seconds" if number >= 1 => options.seconds = number,
            "--pool" if (1..=90).contains(&number) => options.pool = Some(number as u32),
            "--contacts" => return Err("--contacts must be at least 1000".into()),
            "--seconds" => return Err("--seconds must be at least 1".into()),
            "--pool" => return Err("--pool must be between 1 and 90".into()),
            other => return Err(format!("unknown option `{other}`")),
        }
    }
    Ok(options)
}

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let unsafe_allowed = durability::take_unsafe_flag(&mut args);
    if !args.is_empty() {
        if let Err(error) = durability::check(&mailroom_test_support::admin_url(), unsafe_allowed) {
            eprintln!("mailroom-bench: {error:#}");
            return ExitCode::from(2);
        }
    }
    if args.first().map(String::as_str) == Some("webhooks") {
        return webhooks::main(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("announcement") {
        return announcement::main(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("lanes") {
        return lanes::main(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("conversion") {
        return conversion::main(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("delivery") {
        return delivery::main(&args[1..]);
    }
    let options = match parse(&args) {
        Ok(options) => options,
        Err(message) => {
            eprint!("{USAGE}");
            eprintln!("mailroom-bench: {message}");
            return ExitCode::from(2);
        }
    };
    run_on_runtime(audience::run(&options))
}

/// Runs a benchmark on a two-thread runtime (the machine's two cores; the server runs on
/// its own actix worker threads) and turns its outcome into the exit code.
pub fn run_on_runtime(
    benchmark: impl std::future::Future<Output = anyhow::Result<()>>,
) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        // The in-process server runs on actix's own threads; this name tells the load
        // generator's CPU from the server's (`cpu::CpuSplit`).
        .thread_name(cpu::LOAD_THREAD_NAME)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("mailroom-bench: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(benchmark) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("mailroom-bench: {error:#}");
            ExitCode::FAILURE
        }
    }
}
