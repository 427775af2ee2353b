//! The measured server's durability settings, and the mark every printed line carries
//! when they are off.
//!
//! A figure measured with `fsync`, `synchronous_commit` or `full_page_writes` off is the
//! rate of a database that may lose committed work in a crash or a power cut, which no
//! mail service's outbox can run on. So every benchmark reads the three settings with
//! `SHOW` from the server it measures, prints them first, and refuses a server without
//! them unless the run opts in with [`UNSAFE_FAST_DB`]; such a run prints
//! [`NOT_DURABLE_MARK`] at the start of every line (through [`report!`]), so no figure of
//! it can be quoted without saying so.

use std::sync::OnceLock;

use anyhow::{bail, Context, Result};
use diesel::{pg::PgConnection, sql_query, sql_types::Text, Connection, QueryableByName};

/// The command-line opt-in to measure a server without production durability.
pub const UNSAFE_FAST_DB: &str = "--unsafe-fast-db";
/// What starts every printed line of a run on a server without production durability.
pub const NOT_DURABLE_MARK: &str = "[NOT DURABLE] ";

/// The mark of this run's lines, set once by [`check`].
static MARK: OnceLock<&'static str> = OnceLock::new();
/// The measured server's settings in words, set once by [`check`].
static SETTINGS: OnceLock<String> = OnceLock::new();

/// The three settings a commit's survival of a crash depends on, as `SHOW` gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Durability {
    pub fsync: String,
    pub synchronous_commit: String,
    pub full_page_writes: String,
}

impl Durability {
    /// Reads the settings on `url`'s server, as the connecting role sees them.
    pub fn read(url: &str) -> Result<Self> {
        #[derive(QueryableByName)]
        struct Setting {
            #[diesel(sql_type = Text)]
            setting: String,
        }
        let mut sql = PgConnection::establish(url).context("connecting to read the settings")?;
        let mut show = |name: &str| -> Result<String> {
            use diesel::RunQueryDsl;
            Ok(
                sql_query(format!("SELECT current_setting('{name}') AS setting"))
                    .get_result::<Setting>(&mut sql)
                    .with_context(|| format!("reading {name}"))?
                    .setting,
            )
        };
        Ok(Self {
            fsync: show("fsync")?,
            synchronous_commit: show("synchronous_commit")?,
            full_page_writes: show("full_page_writes")?,
        })
    }

    /// Whether a commit this server acknowledged survives a crash of the machine:
    /// fsync and full_page_writes on, and commits wait for their WAL flush
    /// (`synchronous_commit` anything but `off`: `local`, `remote_write`, `on` and
    /// `remote_apply` all flush the local WAL first).
    pub fn is_production(&self) -> bool {
        self.fsync == "on" && self.full_page_writes == "on" && self.synchronous_commit != "off"
    }

    /// `fsync=on, synchronous_commit=on, full_page_writes=on`.
    pub fn settings(&self) -> String {
        format!(
            "fsync={}, synchronous_commit={}, full_page_writes={}",
            self.fsync, self.synchronous_commit, self.full_page_writes
        )
    }
}

/// Takes [`UNSAFE_FAST_DB`] out of `args`; returns whether it was there.
pub fn take_unsafe_flag(args: &mut Vec<String>) -> bool {
    let before = args.len();
    args.retain(|arg| arg != UNSAFE_FAST_DB);
    args.len() != before
}

/// The line that opens a run's report, or the refusal: a server without production
/// durability is measured only when `unsafe_allowed`, and then every line is marked.
pub fn judge(
    durability: &Durability,
    unsafe_allowed: bool,
) -> Result<(String, Option<&'static str>)> {
    if durability.is_production() {
        return Ok((
            format!(
                "PostgreSQL durability (SHOW on the measured server): {}: production durability",
                durability.settings()
            ),
            None,
        ));
    }
    if !unsafe_allowed {
        bail!(
            "the server in DATABASE_URL runs with {}: a commit it acknowledges may be lost in \
             a crash, so its figures would not be the service's. Measure on a server with \
             fsync, synchronous_commit and full_page_writes on, or pass {UNSAFE_FAST_DB} to \
             measure anyway (every line printed is then marked {NOT_DURABLE_MARK:?})",
            durability.settings()
        );
    }
    Ok((
        format!(
            "PostgreSQL durability (SHOW on the measured server): {}: NOT DURABLE \
             ({UNSAFE_FAST_DB}); no figure of this run holds for a production database",
            durability.settings()
        ),
        Some(NOT_DURABLE_MARK),
    ))
}

/// Reads the settings of the server in `url`, prints them (or refuses, see [`judge`]) and
/// sets the mark for the rest of the run.
pub fn check(url: &str, unsafe_allowed: bool) -> Result<()> {
    let durability = Durability::read(url)?;
    let (line, mark) = judge(&durability, unsafe_allowed)?;
    let _ = MARK.set(mark.unwrap_or(""));
    let _ = SETTINGS.set(durability.settings());
    crate::report!("{line}");
    Ok(())
}

/// The measured server's settings (`fsync=on, …`), for a report's summary.
pub fn measured_with() -> &'static str {
    SETTINGS.get().map_or("durability not read", String::as_str)
}

/// `text` with `mark` before each of its lines but the empty ones.
pub fn marked(text: &str, mark: &str) -> String {
    if mark.is_empty() {
        return text.to_owned();
    }
    text.split('\n')
        .map(|line| {
            if line.is_empty() {
                String::new()
            } else {
                format!("{mark}{line}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Prints one line of the report (with the run's mark, see [`report!`]).
pub fn print_line(text: std::fmt::Arguments<'_>) {
    let text = text.to_string();
    println!("{}", marked(&text, MARK.get().copied().unwrap_or("")));
}

/// `println!` for the report: every line of a run on a server without production
/// durability starts with [`NOT_DURABLE_MARK`].
#[macro_export]
macro_rules! report {
    () => {
        $crate::durability::print_line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::durability::print_line(format_args!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(fsync: &str, synchronous_commit: &str, full_page_writes: &str) -> Durability {
        Durability {
            fsync: fsync.into(),
            synchronous_commit: synchronous_commit.into(),
            full_page_writes: full_page_writes.into(),
        }
    }

    #[test]
    fn production_durability_needs_all_three() {
        assert!(settings("on", "on", "on").is_production());
        assert!(settings("on", "local", "on").is_production());
        assert!(settings("on", "remote_write", "on").is_production());
        assert!(!settings("off", "on", "on").is_production());
        assert!(!settings("on", "off", "on").is_production());
        assert!(!settings("on", "on", "off").is_production());
        assert!(!settings("off", "off", "off").is_production());
    }

    #[test]
    fn a_durable_server_is_measured_unmarked_and_says_its_settings() {
        let (line, mark) = judge(&settings("on", "on", "on"), false).expect("measured");
        assert_eq!(mark, None);
        assert!(
            line.contains("fsync=on, synchronous_commit=on, full_page_writes=on"),
            "{line}"
        );
        // The opt-in changes nothing on a durable server.
        assert_eq!(
            judge(&settings("on", "on", "on"), true)
                .expect("measured")
                .1,
            None
        );
    }

    #[test]
    fn a_fast_server_is_refused_unless_the_run_opts_in_and_then_every_line_is_marked() {
        let fast = settings("off", "off", "off");
        let refused = judge(&fast, false).expect_err("refused").to_string();
        assert!(refused.contains("fsync=off"), "{refused}");
        assert!(refused.contains(UNSAFE_FAST_DB), "{refused}");

        let (line, mark) = judge(&fast, true).expect("measured when asked");
        assert_eq!(mark, Some(NOT_DURABLE_MARK));
        assert!(line.contains("NOT DURABLE"), "{line}");
        assert_eq!(
            marked(
                "\n== Reference\n  8 connections  100 messages/s",
                NOT_DURABLE_MARK
            ),
            "\n[NOT DURABLE] == Reference\n[NOT DURABLE]   8 connections  100 messages/s"
        );
        assert_eq!(marked("a figure", ""), "a figure");
    }

    #[test]
    fn the_unsafe_flag_is_taken_out_wherever_it_stands() {
        let mut args: Vec<String> = ["delivery", "--messages", "100", "--unsafe-fast-db"]
            .map(String::from)
            .to_vec();
        assert!(take_unsafe_flag(&mut args));
        assert_eq!(args, ["delivery", "--messages", "100"]);
        assert!(!take_unsafe_flag(&mut args));
        assert_eq!(args.len(), 3);
    }
}
