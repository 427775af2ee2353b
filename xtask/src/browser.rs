//! Headless Chromium and ChromeDriver for the console's browser tests
//! (`tests/console`): Debian's `chromium` and `chromium-driver`, installed with apt-get
//! when missing and running as root, as PostgreSQL is (`xtask/src/postgres.rs`).

use crate::system::{self, note};
use crate::Result;

/// The programs the browser tests start: the browser and its WebDriver server.
const PROGRAMS: [&str; 2] = ["chromium", "chromedriver"];

/// Makes sure `chromium` and `chromedriver` are on PATH. As root, installs the Debian
/// packages when either is missing; otherwise prints advice, and the browser tests fail
/// with a message naming what is missing.
pub fn ensure_chromium() -> Result<()> {
    let missing: Vec<&str> = PROGRAMS
        .into_iter()
        .filter(|program| system::find_in_path(program).is_none())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !system::is_root() {
        note(&format!(
            "warning: {} not found; the console's browser tests will fail. Install them, \
             e.g. `sudo apt-get install chromium chromium-driver`",
            missing.join(" and ")
        ));
        return Ok(());
    }
    note(&format!(
        "{} not found; installing chromium and chromium-driver with apt-get",
        missing.join(" and ")
    ));
    system::apt_install(&["chromium", "chromium-driver"])
}
