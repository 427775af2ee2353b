//! `cargo xtask fuzz [--minutes N] [--max-examples N] [--release] [-- schemathesis args…]`:
//! schemathesis (PyPI) against the real server's `/v2/openapi.json`.
//!
//! Everything it needs is private to the worktree: schemathesis lives in a virtualenv
//! under `target/fuzz-venv` (installed once, pinned), the server runs from
//! `target/<profile>/mailroom` on a free loopback port against a database of its own
//! (`mailroom_fuzz_<pid>`, dropped at the end), and the reports land in `target/fuzz`.
//! Too slow for `cargo xtask test` and CI; run it by hand (docs/fuzzing.md).

use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::postgres::{self, Postgres};
use crate::system::{self, note};
use crate::Result;

/// The schemathesis release this command is written against (its CLI changed a lot
/// between 3.x and 4.x: `--max-time`, `--config-file`, `[parameters]`). 4.x needs
/// Python 3.9 or later.
const SCHEMATHESIS_VERSION: &str = "4.32.5";
/// Checks turned off for single operations, each a schemathesis false positive explained
/// in docs/fuzzing.md. Topics use one body type for create and PATCH; schemathesis
/// learns "name: is required" from the create's 400 answers and then expects the PATCH
/// `{"description": null}` (valid: a PATCH changes only what it names) to be refused.
///
/// Every check runs (schemathesis 4's default) except `positive_data_acceptance`: the
/// schema documents shapes, not every domain rule (email syntax, "a PATCH must change
/// something", a template still used by an automation), so a schema-valid request may
/// rightly be refused with 400 (docs/api-decisions.md). The checks are set here rather
/// than with `--checks`/`--exclude-checks`, which would override the per-operation table.
const ACCEPTED_FALSE_POSITIVES: &str = "\
[checks]
positive_data_acceptance.enabled = false

[[operations]]
include-path = \"/v2/accounts/{accountId}/topics/{topicId}\"
include-method = \"PATCH\"
checks.negative_data_rejection.enabled = false
";
const DEFAULT_MINUTES: u64 = 10;
/// Per operation; with ~60 operations and the coverage phase on top this is a few
/// thousand requests, which fits the default time bound on a laptop.
const DEFAULT_MAX_EXAMPLES: u64 = 100;
/// The fuzz database's secret key: a fixed, public value, because the database is
/// thrown away at the end and nothing sealed with it matters.
const THROWAWAY_SECRET_KEY: &str = "ZnV6ei1vbmx5LXRocm93YXdheS1zZWNyZXQta2V5ISE=";

struct Options {
    minutes: u64,
    max_examples: u64,
    release: bool,
    extra: Vec<String>,
}

fn parse_options(args: &[String]) -> Result<Options> {
    let mut options = Options {
        minutes: DEFAULT_MINUTES,
        max_examples: DEFAULT_MAX_EXAMPLES,
        release: false,
        extra: Vec::new(),
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut number = |name: &str| -> Result<u64> {
            args.next()
                .and_then(|value| value.parse().ok())
                .filter(|value| *value > 0)
                .ok_or_else(|| format!("`{name}` needs a positive whole number"))
        };
        match arg.as_str() {
            "--minutes" => options.minutes = number("--minutes")?,
            "--max-examples" => options.max_examples = number("--max-examples")?,
            "--release" => options.release = true,
            "--" => {
                options.extra = args.cloned().collect();
                break;
            }
            other => {
                return Err(format!(
                    "unknown `fuzz` argument `{other}` (expected --minutes N, --max-examples N, \
                 --release, or `--` followed by schemathesis arguments)"
                ))
            }
        }
    }
    Ok(options)
}

pub fn run(args: &[String]) -> Result<()> {
    let options = parse_options(args)?;
    let root = system::workspace_root();
    let work_dir = root.join("target/fuzz");
    fs::create_dir_all(&work_dir)
        .map_err(|error| format!("could not create {}: {error}", work_dir.display()))?;

    let schemathesis = ensure_schemathesis(&root.join("target/fuzz-venv"))?;
    postgres::ensure_libpq()?;
    let profile = if options.release { "release" } else { "debug" };
    let mut build = Command::new("cargo");
    build.args(["build", "--package", "mailroom-server", "--bin", "mailroom"]);
    if options.release {
        build.arg("--release");
    }
    system::run(&mut build)?;
    let binary = root.join("target").join(profile).join("mailroom");

    let mut postgres = Postgres::provide()?;
    let outcome = FuzzDatabase::create(&postgres.maintenance_url()).and_then(|database| {
        let outcome = fuzz_against(
            &binary,
            &database.url,
            &schemathesis,
            &work_dir,
            &options,
            &mut postgres,
        );
        database.drop_now();
        outcome
    });
    postgres.finish()?;
    outcome
}

fn fuzz_against(
    binary: &Path,
    database_url: &str,
    schemathesis: &Path,
    work_dir: &Path,
    options: &Options,
    postgres: &mut Postgres,
) -> Result<()> {
    let port = free_port()?;
    let base = format!("http://127.0.0.1:{port}");
    let server_log_path = work_dir.join("server.log");
    let server_log = fs::File::create(&server_log_path)
        .map_err(|error| format!("could not create {}: {error}", server_log_path.display()))?;
    let mut serve = server_command(binary, database_url);
    serve
        .arg("serve")
        .env("MAILROOM_LISTEN", format!("127.0.0.1:{port}"))
        .env("MAILROOM_PUBLIC_URL", &base)
        // schemathesis sends requests as fast as it can from one token.
        .env("MAILROOM_RATE_LIMIT_PER_SECOND", "off")
        // Nothing is to be delivered; the API alone is under test.
        .env("MAILROOM_WORKERS", "false")
        .env("MAILROOM_LOG", "warn,mailroom_http=info")
        .stdout(Stdio::null())
        .stderr(server_log);
    eprintln!(
        "$ {} (log: {})",
        system::describe(&serve),
        server_log_path.display()
    );
    let server = serve
        .spawn()
        .map_err(|error| format!("could not start {}: {error}", binary.display()))?;
    let mut server = Server(server);
    postgres.watch_child(server.0.id());
    let outcome = (|| {
        wait_until_healthy(&base, &mut server.0)?;
        let token = create_user(binary, database_url)?;
        let account_id = create_account(&base, &token)?;
        // Kept beside the reports: the failures refer to the document of this build.
        let document = http(&base, "GET", "/v2/openapi.json", None, None)?;
        let _ = fs::write(work_dir.join("openapi.json"), document.body);
        note(&format!("fuzzing account {account_id}"));
        run_schemathesis(schemathesis, &base, &token, &account_id, work_dir, options)?;
        // A run that left the server dead or unhealthy is a finding of its own.
        let health = http(&base, "GET", "/readyz", None, None)?;
        if health.status != 200 {
            return Err(format!(
                "the server is not ready after the run: {} {}",
                health.status, health.body
            ));
        }
        Ok(())
    })();
    server.stop();
    postgres.child_finished();
    let errors_logged = fs::read_to_string(&server_log_path)
        .map(|log| log.lines().filter(|line| line.contains("ERROR")).count())
        .unwrap_or(0);
    note(&format!(
        "server log: {} ({errors_logged} ERROR line(s))",
        server_log_path.display()
    ));
    outcome
}

fn server_command(binary: &Path, database_url: &str) -> Command {
    let mut command = Command::new(binary);
    command
        .env("DATABASE_URL", database_url)
        .env("MAILROOM_SECRET_KEY", THROWAWAY_SECRET_KEY);
    command
}

/// The server process, stopped (SIGTERM, then SIGKILL) however `fuzz_against` ends.
struct Server(Child);

impl Server {
    fn stop(&mut self) {
        if matches!(self.0.try_wait(), Ok(Some(_))) {
            return;
        }
        // std has no SIGTERM without `unsafe`; `kill` is everywhere.
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        if wait_for_exit(&mut self.0, Duration::from_secs(15)).is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn wait_for_exit(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        thread::sleep(Duration::from_millis(100));
    }
    None
}

// ---------------------------------------------------------------------------------------
// schemathesis

/// The `schemathesis` executable in the private virtualenv, installed when it is missing
/// or a different version.
fn ensure_schemathesis(venv: &Path) -> Result<PathBuf> {
    let executable = venv.join("bin/schemathesis");
    let installed = Command::new(&executable)
        .arg("--version")
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned());
    if let Some(version) = &installed {
        if version.ends_with(SCHEMATHESIS_VERSION) {
            note(&format!("{version} from {}", venv.display()));
            return Ok(executable);
        }
    }
    system::python_venv(venv)?;
    system::run(
        Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .arg(format!("schemathesis=={SCHEMATHESIS_VERSION}")),
    )?;
    Ok(executable)
}

fn run_schemathesis(
    schemathesis: &Path,
    base: &str,
    token: &str,
    account_id: &str,
    work_dir: &Path,
    options: &Options,
) -> Result<()> {
    // Every `{accountId}` gets the real account so that requests pass authorization and
    // reach validation; the other ids stay generated (they exercise 400/404).
    let config_path = work_dir.join("schemathesis.toml");
    let config = format!(
        "# Written by `cargo xtask fuzz`; rewritten on every run.\n\
         [parameters]\n\"path.accountId\" = \"{account_id}\"\n\n{ACCEPTED_FALSE_POSITIVES}"
    );
    fs::write(&config_path, config)
        .map_err(|error| format!("could not write {}: {error}", config_path.display()))?;
    // The feedback intake takes a raw `message/rfc822` report, which schemathesis cannot
    // serialize by itself ("Serialization not possible"); as text it reaches the parser.
    let hooks_path = work_dir.join("hooks.py");
    fs::write(
        &hooks_path,
        "# Written by `cargo xtask fuzz`; rewritten on every run.\n\
         import schemathesis\n\n\
         schemathesis.serializer.alias(\"message/rfc822\", \"text/plain\")\n",
    )
    .map_err(|error| format!("could not write {}: {error}", hooks_path.display()))?;
    let seconds = options.minutes * 60;
    let mut command = Command::new(schemathesis);
    command
        .arg("--config-file")
        .arg(&config_path)
        .arg("run")
        .arg(format!("{base}/v2/openapi.json"))
        .arg("--header")
        .arg(format!("Authorization: Bearer {token}"))
        .arg("--max-examples")
        .arg(options.max_examples.to_string())
        .arg("--max-time")
        .arg(seconds.to_string())
        .args(["--workers", "2", "--request-timeout", "30"])
        .args(["--report", "junit,ndjson", "--report-dir"])
        .arg(work_dir.join("report"))
        .args(["--generation-database", "none", "--no-color"])
        .args(&options.extra)
        .env("SCHEMATHESIS_HOOKS", &hooks_path)
        .current_dir(work_dir);
    eprintln!("$ {}", system::describe(&command));
    let started = Instant::now();
    let mut child = command
        .spawn()
        .map_err(|error| format!("could not run {}: {error}", schemathesis.display()))?;
    // `--max-time` bounds generation, not a hung request or shrinking; this is the
    // outer bound so that the command always ends.
    let hard_limit = Duration::from_secs(seconds + 120);
    let status = match wait_for_exit(&mut child, hard_limit) {
        Some(status) => status,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "schemathesis did not finish within {}; killed",
                system::format_duration(hard_limit)
            ));
        }
    };
    note(&format!(
        "schemathesis finished in {} ({status}); reports in {}",
        system::format_duration(started.elapsed()),
        work_dir.join("report").display()
    ));
    if status.success() {
        Ok(())
    } else {
        Err("schemathesis reported failures (see above)".to_owned())
    }
}

// ---------------------------------------------------------------------------------------
// The server's database and bootstrap

/// `mailroom_fuzz_<pid>` on the discovered PostgreSQL.
struct FuzzDatabase {
    maintenance_url: String,
    name: String,
    url: String,
    dropped: bool,
}

impl FuzzDatabase {
    fn create(maintenance_url: &str) -> Result<Self> {
        let name = format!("mailroom_fuzz_{}", std::process::id());
        psql(maintenance_url, &format!("CREATE DATABASE \"{name}\""))?;
        note(&format!("created database {name}"));
        Ok(FuzzDatabase {
            maintenance_url: maintenance_url.to_owned(),
            url: with_database(maintenance_url, &name),
            name,
            dropped: false,
        })
    }

    fn drop_now(mut self) {
        self.drop_database();
    }

    fn drop_database(&mut self) {
        if self.dropped {
            return;
        }
        self.dropped = true;
        match psql(
            &self.maintenance_url,
            &format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name),
        ) {
            Ok(()) => note(&format!("dropped database {}", self.name)),
            Err(error) => note(&format!("warning: {error}")),
        }
    }
}

impl Drop for FuzzDatabase {
    fn drop(&mut self) {
        self.drop_database();
    }
}

fn psql(url: &str, sql: &str) -> Result<()> {
    let psql = match postgres::find_psql() {
        Some(psql) => psql,
        None if system::is_root() => {
            note("psql not found; installing postgresql-client with apt-get");
            system::apt_install(&["postgresql-client"])?;
            postgres::find_psql().ok_or("psql still not found after installing it")?
        }
        None => return Err("psql not found: install postgresql-client".to_owned()),
    };
    let output = Command::new(psql)
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql])
        .output()
        .map_err(|error| format!("could not run psql: {error}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "psql `{sql}` failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// The same URL with another database: the path after the authority, before any query.
fn with_database(url: &str, database: &str) -> String {
    let scheme_end = url.find("://").map_or(0, |index| index + 3);
    let path_start = url[scheme_end..]
        .find('/')
        .map_or(url.len(), |index| scheme_end + index);
    let query_start = url[path_start..]
        .find('?')
        .map_or(url.len(), |index| path_start + index);
    format!("{}/{database}{}", &url[..path_start], &url[query_start..])
}

fn create_user(binary: &Path, database_url: &str) -> Result<String> {
    let mut command = server_command(binary, database_url);
    command.args([
        "user",
        "create",
        "--email",
        "fuzz@example.com",
        "--token-name",
        "fuzz",
    ]);
    eprintln!("$ {}", system::describe(&command));
    let output = command
        .output()
        .map_err(|error| format!("could not run `mailroom user create`: {error}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "`mailroom user create` failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    json_string_field(&stdout, "token")
        .ok_or_else(|| format!("no token in `mailroom user create` output: {stdout}"))
}

fn create_account(base: &str, token: &str) -> Result<String> {
    let response = http(
        base,
        "POST",
        "/v2/accounts",
        Some(token),
        Some(r#"{"name":"fuzz"}"#),
    )?;
    if response.status != 200 {
        return Err(format!(
            "creating the account answered {}: {}",
            response.status, response.body
        ));
    }
    json_string_field(&response.body, "_id")
        .ok_or_else(|| format!("no `_id` in the account: {}", response.body))
}

/// The value of `"field":"…"` in a flat JSON object with plain string values, which is
/// all the two bootstrap answers need (ids and tokens have no escapes).
fn json_string_field(json: &str, field: &str) -> Option<String> {
    let key = format!("\"{field}\"");
    let after_key = &json[json.find(&key)? + key.len()..];
    let after_colon = after_key.trim_start().strip_prefix(':')?.trim_start();
    let value = after_colon.strip_prefix('"')?;
    Some(value[..value.find('"')?].to_owned())
}

// ---------------------------------------------------------------------------------------
// Just enough HTTP/1.1 for the bootstrap and health checks (std only)

struct Response {
    status: u16,
    body: String,
}

fn http(
    base: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    json: Option<&str>,
) -> Result<Response> {
    let authority = base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(authority)
        .map_err(|error| format!("could not connect to {authority}: {error}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|error| error.to_string())?;
    let mut request =
        format!("{method} {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n");
    if let Some(token) = token {
        request.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    let body = json.unwrap_or("");
    if json.is_some() {
        request.push_str("Content-Type: application/json\r\n");
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream
        .write_all(request.as_bytes())
        .map_err(|error| format!("{method} {path}: {error}"))?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .map_err(|error| format!("{method} {path}: {error}"))?;
    let raw = String::from_utf8_lossy(&raw);
    let status = raw
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("{method} {path}: not an HTTP answer"))?;
    let body = raw
        .split_once("\r\n\r\n")
        .map_or("", |(_, body)| body)
        .to_owned();
    // Small answers only; a chunked body keeps its chunk sizes, which the field search
    // above does not mind.
    Ok(Response { status, body })
}

fn wait_until_healthy(base: &str, server: &mut Child) -> Result<()> {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        if let Ok(Some(status)) = server.try_wait() {
            return Err(format!(
                "the server exited during start-up ({status}); see target/fuzz/server.log"
            ));
        }
        if http(base, "GET", "/readyz", None, None).is_ok_and(|response| response.status == 200) {
            return Ok(());
        }
        thread::sleep(Duration::from_millis(200));
    }
    Err("the server did not become ready within 60 s; see target/fuzz/server.log".to_owned())
}

/// A port that was free a moment ago (the server binds it right after).
fn free_port() -> Result<u16> {
    TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|error| format!("could not find a free port: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_of_a_url_is_replaced() {
        assert_eq!(
            with_database(
                "postgres://postgres@127.0.0.1:5432/postgres",
                "mailroom_fuzz_1"
            ),
            "postgres://postgres@127.0.0.1:5432/mailroom_fuzz_1"
        );
        assert_eq!(
            with_database("postgres://u:p@db:5432/app?sslmode=require", "x"),
            "postgres://u:p@db:5432/x?sslmode=require"
        );
        assert_eq!(with_database("postgres://db", "x"), "postgres://db/x");
    }

    #[test]
    fn string_fields_are_read_from_bootstrap_answers() {
        let created = r#"{"userId":"u1","tokenId":"t1","token":"mr_abc"}"#;
        assert_eq!(
            json_string_field(created, "token").as_deref(),
            Some("mr_abc")
        );
        assert_eq!(json_string_field(created, "tokenId").as_deref(), Some("t1"));
        assert_eq!(
            json_string_field(r#"{"_id": "acc_1", "name": "fuzz"}"#, "_id").as_deref(),
            Some("acc_1")
        );
        assert_eq!(json_string_field(created, "missing"), None);
    }

    #[test]
    fn options_have_defaults_and_pass_the_rest_on() {
        let args: Vec<String> = ["--minutes", "3", "--", "--seed", "42"]
            .iter()
            .map(ToString::to_string)
            .collect();
        let options = parse_options(&args).unwrap();
        assert_eq!(options.minutes, 3);
        assert_eq!(options.max_examples, DEFAULT_MAX_EXAMPLES);
        assert_eq!(options.extra, ["--seed", "42"]);
        assert!(parse_options(&["--minutes".to_owned(), "0".to_owned()]).is_err());
    }
}
