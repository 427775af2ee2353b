//! `mailroom worker` with `MAILROOM_METRICS_LISTEN` serves `/metrics` (its delivery
//! counters, the queue gauges and its pool) and still stops on SIGTERM.

use std::{
    net::TcpListener,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use base64::Engine as _;
use mailroom_test_support::TestDatabase;

/// The worker process, killed and reaped however the test ends.
struct WorkerProcess(Child);

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn a_worker_serves_metrics_when_asked_and_stops_on_sigterm() {
    let database = TestDatabase::create();
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_mailroom"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("MAILROOM_") {
            command.env_remove(name);
        }
    }
    let mut worker = WorkerProcess(
        command
            .current_dir(env!("CARGO_TARGET_TMPDIR"))
            .env("DATABASE_URL", database.url())
            .env(
                "MAILROOM_SECRET_KEY",
                base64::engine::general_purpose::STANDARD.encode([7u8; 32]),
            )
            .env("MAILROOM_LOG", "warn")
            .env("MAILROOM_METRICS_LISTEN", format!("127.0.0.1:{port}"))
            .arg("worker")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting `mailroom worker`"),
    );
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("HTTP client");
    let started = Instant::now();
    let text = loop {
        if let Some(status) = worker.0.try_wait().expect("polling the worker") {
            panic!("`mailroom worker` exited early: {status}");
        }
        match client
            .get(format!("http://127.0.0.1:{port}/metrics"))
            .send()
            .await
        {
            Ok(response) if response.status() == 200 => {
                break response.text().await.expect("text");
            }
            _ if started.elapsed() > Duration::from_secs(30) => {
                panic!("no /metrics within 30 s")
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    for series in [
        r#"mailroom_smtp_replies_total{class="accepted"} 0"#,
        r#"mailroom_webhook_deliveries_total{outcome="delivered"} 0"#,
        r#"mailroom_queue_depth{queue="messages"} 0"#,
        "mailroom_queue_stats_up 1",
        "mailroom_db_pool_connections",
    ] {
        assert!(text.contains(series), "{series} missing from:\n{text}");
    }
    let health = client
        .get(format!("http://127.0.0.1:{port}/healthz"))
        .send()
        .await
        .expect("GET /healthz");
    assert_eq!(health.status(), 200);
    let api = client
        .get(format!("http://127.0.0.1:{port}/v2/accounts"))
        .send()
        .await
        .expect("GET /v2/accounts");
    assert_eq!(api.status(), 404, "the worker serves no API");

    let pid = worker.0.id().to_string();
    let kill = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("running kill");
    assert!(kill.success());
    let stopping = Instant::now();
    let status = loop {
        if let Some(status) = worker.0.try_wait().expect("polling the worker") {
            break status;
        }
        assert!(
            stopping.elapsed() < Duration::from_secs(30),
            "the worker did not stop within 30 s of SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(status.success(), "the worker exited with {status}");
}
