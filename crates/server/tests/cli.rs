//! The real `mailroom` binary, run as a separate process against a database of its own:
//! the CLI's output contract (docs/design.md#4-the-command-line), serving, and a graceful stop on SIGTERM.

use std::{
    fs,
    net::TcpListener,
    os::unix::process::ExitStatusExt,
    path::PathBuf,
    process::{Child, Command, ExitStatus, Output, Stdio},
    time::{Duration, Instant},
};

use base64::Engine as _;
use diesel::connection::SimpleConnection;
use mailroom_app::ports::in_transaction;
use mailroom_domain::{account::Role, AccountId, UserId};
use mailroom_test_support::TestDatabase;
use serde_json::Value;

const MAILROOM: &str = env!("CARGO_BIN_EXE_mailroom");

#[test]
fn user_create_prints_exactly_one_json_object() {
    let database = TestDatabase::create();
    let dir = ScratchDir::new("user_create");

    let first = created_user(&run(
        &dir,
        &database,
        &["user", "create", "--email", "ada@example.com"],
    ));
    let token = first["token"].as_str().expect("token is a string");
    assert!(
        token.starts_with("mailroom_pat_") && token.len() == 77,
        "token {token:?} is not `mailroom_pat_` + 64 characters"
    );

    let again = created_user(&run(
        &dir,
        &database,
        &["user", "create", "--email", "ADA@example.com"],
    ));
    assert_eq!(
        again["userId"], first["userId"],
        "the same email in another case is the same user"
    );
    assert_ne!(
        again["token"], first["token"],
        "each run issues a new token"
    );
    assert_ne!(
        again["tokenId"], first["tokenId"],
        "each run issues a new token"
    );

    for (args, why) in [
        (
            &[
                "user",
                "create",
                "--email",
                "ada@example.com",
                "--expires-in-days",
                "45",
            ][..],
            "--expires-in-days 45 (only 30, 60, 90 are allowed)",
        ),
        (
            &["user", "create", "--email", "not-an-email"][..],
            "--email not-an-email",
        ),
    ] {
        let output = run(&dir, &database, args);
        assert!(
            !output.status.success(),
            "{why} must fail, but it exited with {}; stdout: {}",
            output.status,
            String::from_utf8_lossy(&output.stdout)
        );
        assert!(
            output.stdout.is_empty(),
            "{why} failed but printed on stdout: {:?}",
            String::from_utf8_lossy(&output.stdout)
        );
        assert!(!output.stderr.is_empty(), "{why} failed without saying why");
    }
}

/// `mailroom user login-link`: one JSON object with a console link under
/// `MAILROOM_PUBLIC_URL` and its expiry 15 minutes on; only the link's hash is stored; an
/// unknown user fails with nothing on stdout.
#[test]
fn user_login_link_prints_one_link_for_an_existing_user() {
    let database = TestDatabase::create();
    let dir = ScratchDir::new("login_link");
    created_user(&run(
        &dir,
        &database,
        &["user", "create", "--email", "ada@example.com"],
    ));

    let output = mailroom(&dir, &database)
        .env("MAILROOM_PUBLIC_URL", "https://mail.example.com")
        .args(["user", "login-link", "--email", "ADA@example.com"])
        .stdin(Stdio::null())
        .output()
        .expect("running mailroom user login-link");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "exited with {}; stderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(stdout.lines().count(), 1, "{stdout:?}");
    let printed: Value = serde_json::from_str(&stdout).expect("one JSON object");
    let url = printed["url"].as_str().expect("url");
    let secret = url
        .strip_prefix("https://mail.example.com/console/login/")
        .unwrap_or_else(|| panic!("{url} is not a console login link"));
    assert_eq!(secret.len(), 43, "{secret}");
    let expires_at = time::OffsetDateTime::parse(
        printed["expiresAt"].as_str().expect("expiresAt"),
        &time::format_description::well_known::Rfc3339,
    )
    .expect("an RFC 3339 time");
    let lifetime = expires_at - time::OffsetDateTime::now_utc();
    assert!(
        lifetime > time::Duration::minutes(14) && lifetime <= time::Duration::minutes(15),
        "{lifetime}"
    );
    // Stored as its SHA-256, never as printed.
    let mut connection = database.connection();
    connection
        .batch_execute(&format!(
            "DO $$ BEGIN
               IF NOT EXISTS (SELECT 1 FROM console_login_links
                              WHERE secret_hash = sha256(convert_to('{secret}', 'UTF8'))
                                AND used_at IS NULL) THEN
                 RAISE EXCEPTION 'the link is not stored by its hash';
               END IF;
             END $$;"
        ))
        .expect("the link's hash is stored");

    let unknown = run(
        &dir,
        &database,
        &["user", "login-link", "--email", "nobody@example.com"],
    );
    assert!(!unknown.status.success(), "an unknown user got a link");
    assert!(unknown.stdout.is_empty());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no user has the email"));
}

/// `mailroom member add|remove`: one JSON object on success; refusals (the owner, a
/// second add, a bad account id) fail with nothing on stdout. The owner's membership is
/// kept by the store's own statements, whatever the caller checked.
#[test]
fn member_add_and_remove_print_the_membership_and_keep_the_owner() {
    let database = TestDatabase::create();
    let dir = ScratchDir::new("member");
    let ada = created_user(&run(
        &dir,
        &database,
        &["user", "create", "--email", "ada@example.com"],
    ));
    let ada_id = ada["userId"].as_str().expect("user id");
    let account = "01936c5e-7b2a-7cde-8f00-0123456789ab";
    database
        .connection()
        .batch_execute(&format!(
            "INSERT INTO accounts (id, name, created_at) VALUES ('{account}', 'Acme', now()); \
             INSERT INTO memberships (account_id, user_id, role, created_at) \
             VALUES ('{account}', '{ada_id}', 'owner', now());"
        ))
        .expect("an account owned by ada");

    let added = membership(&run(
        &dir,
        &database,
        &[
            "member",
            "add",
            "--account",
            account,
            "--email",
            "Bob@Example.com",
            "--role",
            "admin",
        ],
    ));
    assert_eq!(added["role"], "admin");
    assert_eq!(added["accountId"], account);
    let bob = created_user(&run(
        &dir,
        &database,
        &["user", "create", "--email", "bob@example.com"],
    ));
    assert_eq!(bob["userId"], added["userId"], "the command created bob");

    let removed = membership(&run(
        &dir,
        &database,
        &[
            "member",
            "remove",
            "--account",
            account,
            "--email",
            "bob@example.com",
        ],
    ));
    assert_eq!(removed["userId"], added["userId"]);

    for (args, why) in [
        (
            &[
                "member",
                "remove",
                "--account",
                account,
                "--email",
                "bob@example.com",
            ][..],
            "removing a user who is no longer a member",
        ),
        (
            &[
                "member",
                "remove",
                "--account",
                account,
                "--email",
                "ada@example.com",
            ][..],
            "removing the owner",
        ),
        (
            &[
                "member",
                "add",
                "--account",
                account,
                "--email",
                "ada@example.com",
            ][..],
            "adding the owner again",
        ),
        (
            &[
                "member",
                "add",
                "--account",
                "nope",
                "--email",
                "c@example.com",
            ][..],
            "a malformed account id",
        ),
        (
            &[
                "member",
                "add",
                "--account",
                "01936c5e-7b2a-7cde-8f00-0123456789ac",
                "--email",
                "c@example.com",
            ][..],
            "an unknown account",
        ),
    ] {
        let output = run(&dir, &database, args);
        assert!(
            !output.status.success() && output.stdout.is_empty() && !output.stderr.is_empty(),
            "{why} must fail with a reason on stderr only; status {}, stdout {:?}",
            output.status,
            String::from_utf8_lossy(&output.stdout)
        );
    }

    // The store keeps the owner whatever the caller checked: the statements that demote
    // and remove a member leave the owner's row alone, and say so.
    let (account, ada) = (
        AccountId::from_uuid(account.parse().expect("account id")),
        UserId::from_uuid(ada_id.parse().expect("user id")),
    );
    let store = database.pool_of_one();
    in_transaction(&store, |tx| {
        assert!(!tx.set_member_role(account, ada, Role::Member)?, "demoted");
        assert!(!tx.delete_membership(account, ada)?, "removed");
        assert_eq!(tx.member_role(account, ada)?, Some(Role::Owner));
        Ok(())
    })
    .expect("the owner's membership");
    // And one owner per account (the unique index).
    let second_owner = database.connection().batch_execute(&format!(
        "INSERT INTO memberships (account_id, user_id, role, created_at) \
         VALUES ('{}', '{}', 'owner', now())",
        account.as_uuid(),
        bob["userId"].as_str().expect("bob's id")
    ));
    assert!(second_owner.is_err(), "a second owner");
}

/// The one JSON object a successful `mailroom member add|remove` prints.
fn membership(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.lines().count() == 1,
        "`mailroom member` exited with {}; stdout: {stdout:?}; stderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e}): {stdout:?}"))
}

#[tokio::test]
async fn serve_answers_and_stops_gracefully_on_sigterm() {
    let database = TestDatabase::create();
    let dir = ScratchDir::new("serve");

    // `migrate` from an empty database, then again: the second run has nothing to do.
    database
        .connection()
        .batch_execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public;")
        .expect("emptying the test database");
    for attempt in ["first", "second"] {
        let output = run(&dir, &database, &["migrate"]);
        assert!(
            output.status.success(),
            "the {attempt} `mailroom migrate` exited with {}; stderr:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }

    let port = free_port();
    let stderr_path = dir.path.join("serve.stderr");
    let stderr = fs::File::create(&stderr_path).expect("creating the server's stderr file");
    let mut server = ServerProcess(
        mailroom(&dir, &database)
            .arg("serve")
            .env("MAILROOM_LISTEN", format!("127.0.0.1:{port}"))
            .env("MAILROOM_WORKERS", "false")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("starting `mailroom serve`"),
    );
    let server_stderr = || fs::read_to_string(&stderr_path).unwrap_or_default();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("HTTP client");

    let started = Instant::now();
    loop {
        if let Some(status) = server.0.try_wait().expect("polling the server") {
            panic!(
                "`mailroom serve` exited early ({}); stderr:\n{}",
                describe(status),
                server_stderr()
            );
        }
        match client.get(format!("{base}/healthz")).send().await {
            Ok(response) if response.status() == 200 => break,
            _ if started.elapsed() > Duration::from_secs(30) => panic!(
                "`mailroom serve` did not answer 200 on /healthz within 30 s; stderr:\n{}",
                server_stderr()
            ),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }

    let created = created_user(&run(
        &dir,
        &database,
        &["user", "create", "--email", "grace@example.com"],
    ));
    let token = created["token"].as_str().expect("token is a string");
    let response = client
        .get(format!("{base}/v2/users/me/tokens"))
        .bearer_auth(token)
        .send()
        .await
        .expect("GET /v2/users/me/tokens");
    let status = response.status();
    let body: Value = response.json().await.expect("a JSON body");
    assert_eq!(status, 200, "GET /v2/users/me/tokens answered {body}");
    assert!(
        body["items"]
            .as_array()
            .is_some_and(|items| items.iter().any(|item| item["_id"] == created["tokenId"])),
        "the CLI's token is not among the user's tokens: {body}"
    );

    let pid = server.0.id().to_string();
    let kill = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("running kill");
    assert!(kill.success(), "`kill -TERM {pid}` failed: {kill}");
    let stopping = Instant::now();
    let status = loop {
        if let Some(status) = server.0.try_wait().expect("polling the server") {
            break status;
        }
        assert!(
            stopping.elapsed() < Duration::from_secs(15),
            "`mailroom serve` still running 15 s after SIGTERM; stderr:\n{}",
            server_stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        status.code(),
        Some(0),
        "`mailroom serve` stopped on SIGTERM with {}; stderr:\n{}",
        describe(status),
        server_stderr()
    );
}

/// `mailroom inbound` greets on `MAILROOM_INBOUND_LISTEN`, advertises its size bound,
/// refuses to relay, and stops with exit code 0 on SIGTERM.
#[tokio::test]
async fn inbound_greets_refuses_relaying_and_stops_on_sigterm() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    let database = TestDatabase::create();
    let dir = ScratchDir::new("inbound");
    let port = free_port();
    let stderr_path = dir.path.join("inbound.stderr");
    let stderr = fs::File::create(&stderr_path).expect("creating the listener's stderr file");
    let mut server = ServerProcess(
        mailroom(&dir, &database)
            .arg("inbound")
            .env("MAILROOM_INBOUND_LISTEN", format!("127.0.0.1:{port}"))
            .env("MAILROOM_INBOUND_MAX_MESSAGE_BYTES", "2048")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("starting `mailroom inbound`"),
    );
    let server_stderr = || fs::read_to_string(&stderr_path).unwrap_or_default();
    let started = Instant::now();
    let stream = loop {
        if let Some(status) = server.0.try_wait().expect("polling the listener") {
            panic!(
                "`mailroom inbound` exited early ({}); stderr:\n{}",
                describe(status),
                server_stderr()
            );
        }
        match tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            Ok(stream) => break stream,
            Err(_) if started.elapsed() > Duration::from_secs(30) => panic!(
                "`mailroom inbound` did not listen within 30 s; stderr:\n{}",
                server_stderr()
            ),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    async fn next_line(
        lines: &mut tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
    ) -> String {
        tokio::time::timeout(Duration::from_secs(5), lines.next_line())
            .await
            .expect("a reply within 5 s")
            .expect("reading")
            .expect("a line")
    }
    assert!(next_line(&mut lines).await.starts_with("220 "));
    write.write_all(b"EHLO mx.example.net\r\n").await.unwrap();
    let mut ehlo = Vec::new();
    loop {
        let line = next_line(&mut lines).await;
        let last = line.starts_with("250 ");
        ehlo.push(line);
        if last {
            break;
        }
    }
    assert!(ehlo.iter().any(|l| l == "250-SIZE 2048"), "{ehlo:?}");
    write.write_all(b"MAIL FROM:<>\r\n").await.unwrap();
    assert!(next_line(&mut lines).await.starts_with("250 "));
    write
        .write_all(b"RCPT TO:<someone@example.org>\r\n")
        .await
        .unwrap();
    let refused = next_line(&mut lines).await;
    assert!(refused.starts_with("550 5.7.1"), "{refused}");
    write.write_all(b"QUIT\r\n").await.unwrap();
    assert!(next_line(&mut lines).await.starts_with("221 "));

    let pid = server.0.id().to_string();
    let kill = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("running kill");
    assert!(kill.success());
    let stopping = Instant::now();
    let status = loop {
        if let Some(status) = server.0.try_wait().expect("polling the listener") {
            break status;
        }
        assert!(
            stopping.elapsed() < Duration::from_secs(15),
            "`mailroom inbound` still running 15 s after SIGTERM; stderr:\n{}",
            server_stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status.code(), Some(0), "{}", server_stderr());
}

/// The README's way of running Mailroom without `MAILROOM_SECRET_KEY`: the binary keeps a
/// key of its own in `.mailroom/secret.key` (mode 0600) under its working directory, so a
/// secret sealed by one start opens in the next. `rotate-secrets` opens every stored
/// secret and fails when one opens with neither key, which a fresh key per start would do.
#[tokio::test]
async fn two_starts_without_a_secret_key_open_the_same_sealed_secret() {
    use std::os::unix::fs::PermissionsExt;
    let database = TestDatabase::create();
    let dir = ScratchDir::new("keyfile");
    let without_key = || {
        let mut command = mailroom(&dir, &database);
        command.env_remove("MAILROOM_SECRET_KEY");
        command
    };

    // First start: creates the user, and the key file.
    let output = without_key()
        .args(["user", "create", "--email", "ada@example.com"])
        .stdin(Stdio::null())
        .output()
        .expect("running mailroom user create");
    let created = created_user(&output);
    let token = created["token"].as_str().expect("token is a string");
    let key_file = dir.path.join(".mailroom/secret.key");
    let mode = fs::metadata(&key_file)
        .unwrap_or_else(|e| panic!("{} was not created: {e}", key_file.display()))
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the key file must be private");

    // Second start: the server seals a webhook signing secret.
    let port = free_port();
    let mut server = ServerProcess(
        without_key()
            .arg("serve")
            .env("MAILROOM_LISTEN", format!("127.0.0.1:{port}"))
            .env("MAILROOM_WORKERS", "false")
            // The receiver's address is only checked, never called: loopback, offline.
            .env("MAILROOM_ALLOW_PRIVATE_EGRESS", "true")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting `mailroom serve`"),
    );
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("HTTP client");
    let started = Instant::now();
    while !matches!(
        client.get(format!("{base}/healthz")).send().await,
        Ok(response) if response.status() == 200
    ) {
        assert!(
            server.0.try_wait().expect("polling the server").is_none(),
            "`mailroom serve` exited early"
        );
        assert!(started.elapsed() < Duration::from_secs(30), "no /healthz");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let account: Value = client
        .post(format!("{base}/v2/accounts"))
        .bearer_auth(token)
        .json(&serde_json::json!({"name": "Keyfile"}))
        .send()
        .await
        .expect("POST /v2/accounts")
        .json()
        .await
        .expect("an account");
    let account_id = account["_id"].as_str().expect("account id");
    let webhook = client
        .put(format!("{base}/v2/accounts/{account_id}/webhooks"))
        .bearer_auth(token)
        .json(&serde_json::json!({
            "url": "http://127.0.0.1:9/mailroom",
            "authType": "none",
            "events": ["contact.bounced"]
        }))
        .send()
        .await
        .expect("PUT webhooks");
    assert_eq!(webhook.status(), 200, "{:?}", webhook.text().await);
    drop(server);

    // Third start, again without the variable: every stored secret opens.
    let rotation = without_key()
        .arg("rotate-secrets")
        .stdin(Stdio::null())
        .output()
        .expect("running mailroom rotate-secrets");
    let stdout = String::from_utf8_lossy(&rotation.stdout);
    assert!(
        rotation.status.success(),
        "a secret sealed by the previous start does not open: {stdout}\n{}",
        String::from_utf8_lossy(&rotation.stderr)
    );
    let summary: Value = serde_json::from_str(&stdout).expect("one JSON summary");
    assert_eq!(summary["complete"], true, "{summary}");
    assert_eq!(summary["resealed"], 0, "{summary}");

    // The check can fail: under another key the same secret does not open.
    let other_key = mailroom(&dir, &database)
        .env(
            "MAILROOM_SECRET_KEY",
            base64::engine::general_purpose::STANDARD.encode([9u8; 32]),
        )
        .arg("rotate-secrets")
        .stdin(Stdio::null())
        .output()
        .expect("running mailroom rotate-secrets");
    assert!(!other_key.status.success(), "another key opened the secret");
}

/// A broken template in `MAILROOM_PAGE_TEMPLATES` stops `mailroom serve` before it
/// listens, with the file and the line on stderr.
#[test]
fn serve_refuses_to_start_with_a_broken_page_template() {
    let database = TestDatabase::create();
    let dir = ScratchDir::new("broken-templates");
    let templates = dir.path.join("templates");
    fs::create_dir_all(&templates).expect("templates directory");
    let file = templates.join("sign_in.html");
    fs::write(&file, "<h1>{{ t.sign_in_title }}</h1>\n{% if %}\n").expect("template");
    let port = free_port();
    let mut child = mailroom(&dir, &database)
        .arg("serve")
        .env("MAILROOM_LISTEN", format!("127.0.0.1:{port}"))
        .env("MAILROOM_WORKERS", "false")
        .env("MAILROOM_PAGE_TEMPLATES", &templates)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mailroom starts");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("status") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("`mailroom serve` kept running with a broken template");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = child.wait_with_output().expect("output");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!status.success(), "exited with {status}; stderr:\n{stderr}");
    assert!(stderr.contains(&file.display().to_string()), "{stderr}");
    assert!(stderr.contains("line 2"), "{stderr}");
}

/// `mailroom` with a clean environment of its own: the test database, a fixed key, quiet
/// logs, and a scratch working directory (so no `.mailroom/` appears in the repository).
fn mailroom(dir: &ScratchDir, database: &TestDatabase) -> Command {
    let mut command = Command::new(MAILROOM);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("MAILROOM_") {
            command.env_remove(name);
        }
    }
    command
        .current_dir(&dir.path)
        .env("DATABASE_URL", database.url())
        .env(
            "MAILROOM_SECRET_KEY",
            base64::engine::general_purpose::STANDARD.encode([7u8; 32]),
        )
        .env("MAILROOM_LOG", "warn");
    command
}

fn run(dir: &ScratchDir, database: &TestDatabase, args: &[&str]) -> Output {
    mailroom(dir, database)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running mailroom {args:?}: {e}"))
}

/// The one JSON object a successful `mailroom user create` prints, checked for shape.
fn created_user(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "`mailroom user create` exited with {}; stdout: {stdout:?}; stderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.ends_with('\n') && stdout.lines().count() == 1,
        "stdout must be exactly one line, got {stdout:?}"
    );
    let value: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e}): {stdout:?}"));
    let keys: Vec<&str> = value
        .as_object()
        .unwrap_or_else(|| panic!("stdout is not a JSON object: {stdout:?}"))
        .keys()
        .map(String::as_str)
        .collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        ["token", "tokenId", "userId"],
        "unexpected keys in {stdout:?}"
    );
    assert!(
        value
            .as_object()
            .is_some_and(|object| object.values().all(Value::is_string)),
        "every value must be a string: {stdout:?}"
    );
    value
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding a free port");
    listener.local_addr().expect("local address").port()
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => status.to_string(),
    }
}

/// The server process, killed and reaped when the test ends, however it ends.
struct ServerProcess(Child);

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// A working directory of the test's own under Cargo's target tmp dir, removed at the end.
struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    fn new(test: &str) -> Self {
        let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "cli-{test}-{}-{}",
            std::process::id(),
            uuid::Uuid::now_v7().simple()
        ));
        fs::create_dir_all(&path).expect("creating a scratch directory");
        Self { path }
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}
