//! A headless Chromium driven through WebDriver (chromedriver) for one test, and the
//! checks every screen gets: axe-core in the page, and screenshots at 1280 and 390 px.

use std::{
    net::TcpListener,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use fantoccini::{elements::Element, Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{json, Value};

/// axe-core 4.14.1 from npm (`axe-core`), vendored so the test needs no network.
const AXE: &str = include_str!("fixtures/axe.min.js");

/// The widths every screen is captured and checked at (desktop, and a 390 px phone).
pub const WIDTHS: [(u32, u32); 2] = [(1280, 900), (390, 844)];

/// One chromedriver on a free port and one browser session behind it.
pub struct Browser {
    pub client: Client,
    driver: Child,
    profile: PathBuf,
}

fn find_program(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(name))
                .find(|candidate| candidate.is_file())
        })
        .unwrap_or_else(|| {
            panic!(
                "{name} not found on PATH: the console's browser tests need Debian's chromium \
                 and chromium-driver (`cargo xtask test` installs them when run as root)"
            )
        })
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free loopback port")
}

fn target_dir() -> PathBuf {
    // CARGO_TARGET_TMPDIR is `<target>/tmp`.
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .to_path_buf()
}

impl Browser {
    /// Starts chromedriver on a free port and opens a headless Chromium with a fresh
    /// profile, with the flags this machine's closed network needs (no background
    /// connections, no component updates, no QUIC).
    pub async fn start() -> Self {
        Self::launch(None).await
    }

    /// As [`Browser::start`], with the browser asking for pages in `language` (its
    /// `Accept-Language`), for the public pages' translations.
    pub async fn start_in_language(language: &str) -> Self {
        Self::launch(Some(language)).await
    }

    async fn launch(language: Option<&str>) -> Self {
        let chromium = find_program("chromium");
        let chromedriver = find_program("chromedriver");
        let port = free_port();
        // A process group of its own: the browser it starts joins it, so a failing test
        // ends chromedriver and Chromium together (see `Drop`).
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let profile = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("chromium-profile-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&profile);
        std::fs::create_dir_all(&profile).expect("profile directory");
        let mut capabilities = serde_json::Map::new();
        let mut options = json!({
            "binary": chromium,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--disable-crash-reporter",
                "--window-size=1280,900",
                format!("--user-data-dir={}", profile.display()),
            ],
        });
        if let Some(language) = language {
            options["args"]
                .as_array_mut()
                .expect("args")
                .push(json!(format!("--lang={language}")));
            options["prefs"] = json!({ "intl.accept_languages": language });
        }
        capabilities.insert("goog:chromeOptions".to_owned(), options);
        let url = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        let client = loop {
            let mut builder = ClientBuilder::new(HttpConnector::new());
            builder.capabilities(capabilities.clone());
            match builder.connect(&url).await {
                Ok(client) => break client,
                Err(error) if started.elapsed() < Duration::from_secs(20) => {
                    let _ = error;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(error) => panic!("no WebDriver session on {url}: {error}"),
            }
        };
        Self {
            client,
            driver,
            profile,
        }
    }

    /// Loads `url` and waits for the document.
    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.expect("navigation");
    }

    /// The one element matching `css`.
    pub async fn find(&self, css: &str) -> Element {
        match self.client.find(Locator::Css(css)).await {
            Ok(element) => element,
            Err(error) => {
                let url = self.client.current_url().await.map(|url| url.to_string());
                let source = self.client.source().await.unwrap_or_default();
                panic!("no element {css} at {url:?}: {error}\n{source}")
            }
        }
    }

    /// How many elements match `css`.
    pub async fn count(&self, css: &str) -> usize {
        self.client
            .find_all(Locator::Css(css))
            .await
            .expect("query")
            .len()
    }

    /// Types `text` into the field matching `css`.
    pub async fn fill(&self, css: &str, text: &str) {
        self.find(css).await.send_keys(text).await.expect("typing");
    }

    /// Clicks the element matching `css`, a submit button, and waits for the next page:
    /// until the old document is gone (its root element is stale) and the new one loaded.
    pub async fn click(&self, css: &str) {
        let old_root = self.find("html").await;
        self.find(css).await.click().await.expect("click");
        let started = Instant::now();
        while old_root.tag_name().await.is_ok() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "clicking {css} loaded no new page"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        while self
            .client
            .execute("return document.readyState", vec![])
            .await
            .ok()
            .and_then(|state| state.as_str().map(|state| state == "complete"))
            != Some(true)
        {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "page never loaded"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Answers the second step of a destructive form: the page names `what` and keeps
    /// the console's header, then its button is pressed.
    pub async fn confirm(&self, what: &str) {
        let text = self.text().await;
        assert!(text.contains(what), "the confirmation names {what}: {text}");
        assert_eq!(self.count("header nav").await, 1, "the layout stays");
        self.click("[data-testid=confirm]").await;
    }

    /// The page's visible text.
    pub async fn text(&self) -> String {
        self.find("body").await.text().await.expect("text")
    }

    /// The current URL's path.
    pub async fn path(&self) -> String {
        self.client
            .current_url()
            .await
            .expect("url")
            .path()
            .to_owned()
    }

    /// Checks the screen at both widths: the page is no wider than the window (nothing
    /// scrolls sideways but the regions made to), axe-core finds no serious or critical
    /// violation, and a screenshot is saved as `target/console-screens/<name>-<width>.png`.
    pub async fn check_screen(&self, name: &str) {
        let screens = target_dir().join("console-screens");
        std::fs::create_dir_all(&screens).expect("screens directory");
        for (width, height) in WIDTHS {
            self.client
                .set_window_size(width, height)
                .await
                .expect("window size");
            let overflow = self.horizontal_overflow().await;
            assert!(
                overflow.is_null(),
                "{name} scrolls sideways at {width} px (the page must fit its width): \
                 {overflow}"
            );
            let violations = self.axe().await;
            assert!(
                violations.is_empty(),
                "axe-core found serious or critical violations on {name} at {width} px: \
                 {}",
                Value::Array(violations.clone())
            );
            let png = self.client.screenshot().await.expect("screenshot");
            std::fs::write(screens.join(format!("{name}-{width}.png")), png)
                .expect("screenshot saved");
        }
        self.client
            .set_window_size(WIDTHS[0].0, WIDTHS[0].1)
            .await
            .expect("window size");
    }

    /// `null` when the document fits the window's width; else its width, the window's,
    /// and the elements whose right edge passes the window (at most five), to say what
    /// pushes it.
    pub async fn horizontal_overflow(&self) -> Value {
        self.client
            .execute(
                "const root = document.documentElement;
                 if (root.scrollWidth <= root.clientWidth) { return null; }
                 const wide = [];
                 for (const element of document.body.querySelectorAll('*')) {
                   const box = element.getBoundingClientRect();
                   if (box.right > root.clientWidth + 1 && wide.length < 5) {
                     wide.push(element.tagName.toLowerCase()
                       + (element.id ? '#' + element.id : '')
                       + (element.className && typeof element.className === 'string'
                          ? '.' + element.className.trim().split(/\\s+/).join('.') : '')
                       + ' ' + Math.round(box.right) + 'px');
                   }
                 }
                 return { page: root.scrollWidth, window: root.clientWidth, wide: wide };",
                vec![],
            )
            .await
            .expect("the page's width")
    }

    /// Runs axe-core in the page; returns the serious and critical violations.
    pub async fn axe(&self) -> Vec<Value> {
        self.client
            .execute(&format!("{AXE}\n;return true;"), vec![])
            .await
            .expect("axe-core loads");
        let result = self
            .client
            .execute_async(
                "const done = arguments[arguments.length - 1];
                 axe.run(document, { resultTypes: ['violations'] })
                   .then(r => done({ rulesPassed: r.passes.length, violations: r.violations
                     .filter(v => v.impact === 'serious' || v.impact === 'critical')
                     .map(v => ({ id: v.id, impact: v.impact, help: v.help,
                                  nodes: v.nodes.map(n => n.target.join(' ')) })) }))
                   .catch(e => done({ rulesPassed: 0, violations: [{ id: 'axe-error', help: String(e) }] }));",
                vec![],
            )
            .await
            .expect("axe-core runs");
        // A run that checked nothing would pass anything.
        assert!(
            result["rulesPassed"]
                .as_u64()
                .is_some_and(|passed| passed > 0),
            "axe-core did not run: {result}"
        );
        result["violations"]
            .as_array()
            .cloned()
            .expect("axe-core's violations")
    }

    /// Ends the browser session and chromedriver.
    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // A failing test never reaches `close`: neither chromedriver nor the browser it
        // started may outlive it. Both are in the group led by chromedriver.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.driver.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}
