//! A Citus node that goes away: a test stops the cluster's spare node (the one
//! `TestDatabase::add_spare_node` adds) with a fast shutdown and starts it again, as an
//! operator's restart or a crashed machine that comes back would.
//!
//! The node is started again from its own `postmaster.opts`, the command line PostgreSQL
//! wrote when it last started, as the user who owns its data directory: the test needs
//! to know nothing of how `cargo xtask citus` started it, and the node comes back with
//! the same settings. (`pg_ctl restart` would do the same, but with no gap between the
//! stop and the start.)

use std::{
    fs,
    net::{SocketAddr, TcpStream},
    os::unix::{fs::MetadataExt, process::CommandExt},
    path::PathBuf,
    process::{Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use diesel::{sql_query, sql_types::Text, QueryableByName, RunQueryDsl};

use crate::database::{assertion_connection, citus_spare, host_and_port};

/// How long a stop or a start may take before the test fails.
const WITHIN: Duration = Duration::from_secs(60);

/// The spare node, stopped; [`StoppedNode::start`] brings it back, and so does dropping
/// it (a failed test must not leave the node down for the tests after it).
pub struct StoppedNode {
    url: String,
    port: u16,
    data_dir: PathBuf,
    command_line: Vec<String>,
    owner: (u32, u32),
    started: bool,
}

#[derive(QueryableByName)]
struct Setting {
    #[diesel(sql_type = Text)]
    setting: String,
}

/// Stops the spare node with a fast shutdown (sessions are ended, nothing waits for
/// them) and returns once its port is closed.
///
/// # Panics
/// When there is no spare node (`MAILROOM_CITUS_SPARE`), or it does not stop in time.
#[must_use]
pub fn stop_spare_node() -> StoppedNode {
    let url = citus_spare().expect("MAILROOM_CITUS_SPARE names the spare node");
    let (_, port) = host_and_port(&url);
    let data_dir = PathBuf::from(
        sql_query("SELECT setting FROM pg_settings WHERE name = 'data_directory'")
            .get_result::<Setting>(&mut assertion_connection(&url))
            .expect("reading the spare node's data directory")
            .setting,
    );
    let command_line = parse_postmaster_opts(
        &fs::read_to_string(data_dir.join("postmaster.opts"))
            .expect("reading the spare node's postmaster.opts"),
    );
    let metadata = fs::metadata(&data_dir).expect("the spare node's data directory");
    let pid = fs::read_to_string(data_dir.join("postmaster.pid"))
        .expect("reading the spare node's postmaster.pid")
        .lines()
        .next()
        .expect("a pid in postmaster.pid")
        .trim()
        .to_owned();
    // SIGINT is PostgreSQL's fast shutdown.
    let status = Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .expect("running kill");
    assert!(status.success(), "kill -INT {pid} failed");
    let started = Instant::now();
    while accepts_tcp(port) || data_dir.join("postmaster.pid").exists() {
        assert!(
            started.elapsed() < WITHIN,
            "the spare node did not stop within {WITHIN:?}"
        );
        thread::sleep(Duration::from_millis(50));
    }
    StoppedNode {
        url,
        port,
        data_dir,
        command_line,
        owner: (metadata.uid(), metadata.gid()),
        started: false,
    }
}

impl StoppedNode {
    /// Starts the node again and returns once it answers queries.
    ///
    /// # Panics
    /// When it does not come back in time.
    pub fn start(mut self) {
        self.start_now();
    }

    fn start_now(&mut self) {
        self.started = true;
        let log = self.data_dir.with_extension("log");
        let output = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("opening the spare node's log");
        let (program, args) = self
            .command_line
            .split_first()
            .expect("postmaster.opts names the server program");
        // Through a shell that starts the server in the background and exits, as pg_ctl
        // does: the server is then no child of the test, which neither waits for it nor
        // leaves it a zombie.
        let mut command = Command::new("sh");
        command
            .args(["-c", "\"$0\" \"$@\" &", program])
            .args(args)
            .stdin(Stdio::null())
            .stdout(output.try_clone().expect("the log, twice"))
            .stderr(output)
            // Its own process group: the test's signals and its end are not the node's.
            .process_group(0);
        // The server refuses to run as root; it runs as the owner of its data, without the
        // test's HOME: libpq in the server (a shard move's subscription) looks for client
        // certificates under ~/.postgresql, and a HOME it may not read is an error there,
        // which left a rebalance onto the restarted node waiting for ever. Without HOME
        // libpq takes the owner's home from the password database.
        if self.owner.0 != 0 {
            command
                .uid(self.owner.0)
                .gid(self.owner.1)
                .env_remove("HOME");
        }
        let status = command.status().expect("starting the spare node again");
        assert!(status.success(), "starting the spare node again: {status}");
        let started = Instant::now();
        loop {
            if accepts_tcp(self.port)
                && diesel::Connection::establish(&self.url)
                    .map(|_: diesel::PgConnection| ())
                    .is_ok()
            {
                return;
            }
            assert!(
                started.elapsed() < WITHIN,
                "the spare node did not start again within {WITHIN:?} (log: {})",
                log.display()
            );
            thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for StoppedNode {
    fn drop(&mut self) {
        if !self.started {
            self.start_now();
        }
    }
}

fn accepts_tcp(port: u16) -> bool {
    TcpStream::connect_timeout(
        &SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(200),
    )
    .is_ok()
}

/// The words of `postmaster.opts`: the program, then each argument in double quotes
/// (PostgreSQL writes them so, without escapes).
fn parse_postmaster_opts(text: &str) -> Vec<String> {
    let text = text.trim();
    let (program, mut rest) = text.split_once(' ').unwrap_or((text, ""));
    let mut words = vec![program.to_owned()];
    while let Some(start) = rest.find('"') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('"') else { break };
        words.push(after[..end].to_owned());
        rest = &after[end + 1..];
    }
    words
}

#[cfg(test)]
mod tests {
    use super::parse_postmaster_opts;

    #[test]
    fn postmaster_opts_give_the_program_and_each_quoted_argument() {
        assert_eq!(
            parse_postmaster_opts(
                "/usr/lib/postgresql/15/bin/postgres \"-D\" \"/data/spare\" \"-c\" \
                 \"shared_preload_libraries=citus,pg_stat_statements\" \"-k\" \"\"\n"
            ),
            [
                "/usr/lib/postgresql/15/bin/postgres",
                "-D",
                "/data/spare",
                "-c",
                "shared_preload_libraries=citus,pg_stat_statements",
                "-k",
                ""
            ]
        );
    }
}
