//! Structured logs to standard error (standard output is reserved for command results,
//! such as the JSON of `mailroom user create`).

use tracing_subscriber::{fmt, EnvFilter};

/// Installs the global subscriber: filter from `MAILROOM_LOG` (default `info`), JSON lines
/// when `MAILROOM_LOG_FORMAT=json`.
pub fn init() {
    let filter = EnvFilter::try_from_env("MAILROOM_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let json = std::env::var("MAILROOM_LOG_FORMAT")
        .is_ok_and(|format| format.eq_ignore_ascii_case("json"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let installed = if json {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.try_init()
    };
    // A second init (tests) keeps the first subscriber.
    drop(installed);
}
