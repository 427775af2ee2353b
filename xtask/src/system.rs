//! Small helpers around child processes, the file system and the host: everything
//! xtask does to the machine goes through here so it is echoed the same way.

use std::env;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::OnceLock;
use std::time::Duration;

use crate::Result;

/// Prints a progress or status line. Everything xtask says goes to stderr so that
/// stdout stays clean for output meant for scripts (`cargo xtask db url`).
pub fn note(message: &str) {
    eprintln!("xtask: {message}");
}

/// The workspace root: xtask's manifest lives in `<root>/xtask`, so this does not
/// depend on the directory `cargo xtask` was typed in.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask's manifest directory has a parent")
        .to_path_buf()
}

/// Whether we run as root. Without `libc` (and with `unsafe` forbidden) there is no
/// `geteuid()`, so ask `id -u` once and remember the answer.
pub fn is_root() -> bool {
    static IS_ROOT: OnceLock<bool> = OnceLock::new();
    *IS_ROOT.get_or_init(|| {
        Command::new("id")
            .arg("-u")
            .output()
            .map(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
            .unwrap_or(false)
    })
}

/// Whether a system user exists (`runuser -u postgres` fails obscurely otherwise).
pub fn user_exists(name: &str) -> bool {
    Command::new("id")
        .arg("-u")
        .arg(name)
        .output()
        .map(|output| output.status.success())
        .unwrap_or(false)
}

/// Looks an executable up in `PATH`, like `command -v`.
pub fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = env::var_os("PATH")?;
    env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Runs a command with inherited stdio after echoing it, and fails unless it succeeds.
pub fn run(command: &mut Command) -> Result<()> {
    let status = run_status(command)?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{}` failed ({status})", describe(command)))
    }
}

/// Runs a command with inherited stdio after echoing it and returns its exit status.
pub fn run_status(command: &mut Command) -> Result<ExitStatus> {
    eprintln!("$ {}", describe(command));
    command
        .status()
        .map_err(|error| format!("could not run `{}`: {error}", describe(command)))
}

/// The command as a person would type it (environment overrides first), for echoing
/// and error messages.
pub fn describe(command: &Command) -> String {
    let mut words: Vec<String> = command
        .get_envs()
        .filter_map(|(key, value)| {
            let value = value?;
            Some(format!(
                "{}={}",
                key.to_string_lossy(),
                // A DATABASE_URL may carry a password; echoed commands land in CI logs.
                shell_quote(&redact_password(&value.to_string_lossy()))
            ))
        })
        .collect();
    words.push(shell_quote(&command.get_program().to_string_lossy()));
    words.extend(
        command
            .get_args()
            .map(OsStr::to_string_lossy)
            .map(|arg| shell_quote(&arg)),
    );
    words.join(" ")
}

/// Hides the password of a `postgres://user:password@host/db` URL for log lines.
pub fn redact_password(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|index| index + 3) else {
        return url.to_owned();
    };
    let authority_end = url[scheme_end..]
        .find('/')
        .map_or(url.len(), |index| scheme_end + index);
    let authority = &url[scheme_end..authority_end];
    match (authority.rfind('@'), authority.find(':')) {
        (Some(at), Some(colon)) if colon < at => format!(
            "{}{}:***{}",
            &url[..scheme_end],
            &authority[..colon],
            &url[scheme_end + at..]
        ),
        _ => url.to_owned(),
    }
}

/// Quotes a word for a POSIX shell, leaving common safe words bare for readability.
pub fn shell_quote(word: &str) -> String {
    let is_safe = |c: char| c.is_ascii_alphanumeric() || "-_./:@%+=,".contains(c);
    if !word.is_empty() && word.chars().all(is_safe) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Installs Debian packages with apt-get. Only called when running as root, because
/// a non-root developer's machine is theirs to manage; we print advice instead.
pub fn apt_install(packages: &[&str]) -> Result<()> {
    if find_in_path("apt-get").is_none() {
        return Err(format!(
            "apt-get is not available; install {} with your package manager",
            packages.join(" ")
        ));
    }
    run(Command::new("apt-get")
        .arg("update")
        .env("DEBIAN_FRONTEND", "noninteractive"))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends"])
        .args(packages)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

/// Creates a Python virtualenv at `venv` unless it has one (installing python3-venv with
/// apt-get when running as root and the module is missing), and returns its `pip`.
pub fn python_venv(venv: &Path) -> Result<PathBuf> {
    let pip = venv.join("bin/pip");
    if pip.exists() {
        return Ok(pip);
    }
    let python = find_in_path("python3").ok_or(
        "python3 not found; install Python 3.9 or later (e.g. `apt-get install python3 python3-venv`)",
    )?;
    let has_venv = Command::new(&python)
        .args(["-c", "import venv, ensurepip"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !has_venv {
        if !is_root() {
            return Err("python3's venv module is missing: install python3-venv".to_owned());
        }
        note("python3-venv not found; installing it with apt-get");
        apt_install(&["python3-venv"])?;
    }
    run(Command::new(&python).args(["-m", "venv"]).arg(venv))?;
    Ok(pip)
}

/// Puts `dir` first in this process's PATH, which the commands it runs inherit.
pub fn prepend_to_path(dir: &Path) {
    let path = env::var_os("PATH").unwrap_or_default();
    let dirs = std::iter::once(dir.to_path_buf())
        .chain(env::split_paths(&path).filter(|known| known != dir));
    if let Ok(joined) = env::join_paths(dirs) {
        // xtask is single-threaded when it does this, before starting the tests.
        env::set_var("PATH", joined);
    }
}

/// `1m 05s` or `12.3s`.
pub fn format_duration(duration: Duration) -> String {
    let seconds = duration.as_secs();
    if seconds >= 60 {
        format!("{}m {:02}s", seconds / 60, seconds % 60)
    } else {
        format!("{:.1}s", duration.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quote_leaves_urls_bare_and_quotes_the_rest() {
        assert_eq!(
            shell_quote("postgres://postgres@127.0.0.1:5432/mailroom"),
            "postgres://postgres@127.0.0.1:5432/mailroom"
        );
        assert_eq!(shell_quote("select 1"), "'select 1'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn passwords_are_hidden_in_log_lines() {
        assert_eq!(
            redact_password("postgres://app:s3cret@db.example:5432/mailroom"),
            "postgres://app:***@db.example:5432/mailroom"
        );
        assert_eq!(
            redact_password("postgres://postgres@127.0.0.1:5432/mailroom"),
            "postgres://postgres@127.0.0.1:5432/mailroom"
        );
        assert_eq!(redact_password("host=/tmp dbname=x"), "host=/tmp dbname=x");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(format_duration(Duration::from_millis(12_340)), "12.3s");
        assert_eq!(format_duration(Duration::from_secs(65)), "1m 05s");
    }
}
