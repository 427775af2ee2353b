use std::time::{Duration, Instant};

use mailroom_test_support::{
    HostileSmtpServer, Hostility, TestSmtpOptions, TestSmtpServer, TlsMode,
};
use mailroom_tests::{expect_json, expect_problem, spawn_app, spawn_app_with, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

fn smtp(tls: TlsMode, auth: bool) -> TestSmtpServer {
    TestSmtpServer::start(TestSmtpOptions {
        tls,
        auth: auth.then(|| ("mailer".to_owned(), "s3cret-pass".to_owned())),
        ..TestSmtpOptions::default()
    })
}

fn body(server: &TestSmtpServer, password: &str) -> Value {
    json!({
        "serviceType": "smtp", "host": "127.0.0.1", "port": server.port(),
        "secure": false, "requireTLS": false, "user": "mailer", "password": password,
        "defaultFromEmail": "hello@example.com", "defaultFromName": "Acme"
    })
}

async fn setup(app: &TestApp) -> (String, String) {
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    (token, format!("/v2/accounts/{account}/mail-servers"))
}

async fn loopback_app() -> TestApp {
    spawn_app_with(|config| config.allow_private_egress = true).await
}

#[tokio::test]
async fn right_credentials_save_and_reads_mask_the_password() {
    let app = loopback_app().await;
    let (token, path) = setup(&app).await;
    let server = smtp(TlsMode::None, true);
    let created = expect_json(
        app.send_json(Method::POST, &path, &token, &body(&server, "s3cret-pass"))
            .await,
        200,
    )
    .await;
    assert_eq!(created["password"], "", "create answers an empty password");
    // The server offers no STARTTLS: the check authenticated in clear, and says so.
    assert_eq!(created["credentialsSentInClear"], true);
    let warnings = created["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].as_str().unwrap().contains("sent unencrypted"),
        "{warnings:?}"
    );
    assert_eq!(created["requireTLS"], false);
    assert_eq!(created["allowInsecureTLS"], false);
    assert_eq!(
        server.connection_count(),
        1,
        "the credentials were checked against the server"
    );
    let id = created["_id"].as_str().expect("id");
    let listed = expect_json(app.get(&path, &token).await, 200).await;
    assert_eq!(listed["items"][0]["password"], "********");
    assert!(listed["items"][0].get("warnings").is_none());
    assert!(listed["items"][0].get("credentialsSentInClear").is_none());
    let one = expect_json(app.get(&format!("{path}/{id}"), &token).await, 200).await;
    assert_eq!(one["password"], "********");
    assert_eq!(
        expect_json(app.get(&format!("{path}/count"), &token).await, 200).await["count"],
        1
    );
    use diesel::{sql_types::Bytea, QueryableByName, RunQueryDsl};
    #[derive(QueryableByName)]
    struct Row {
        #[diesel(sql_type = Bytea)]
        password: Vec<u8>,
    }
    let rows: Vec<Row> = diesel::sql_query("SELECT password FROM mail_servers")
        .load(&mut app.database.connection())
        .expect("row");
    assert!(
        !rows[0].password.windows(11).any(|w| w == b"s3cret-pass"),
        "sealed at rest"
    );
}

#[tokio::test]
async fn wrong_password_is_400_with_the_server_reply_and_nothing_is_stored() {
    let app = loopback_app().await;
    let (token, path) = setup(&app).await;
    let server = smtp(TlsMode::None, true);
    let problem = expect_problem(
        app.send_json(Method::POST, &path, &token, &body(&server, "wrong"))
            .await,
        400,
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "password");
    assert!(
        problem["detail"].as_str().expect("detail").contains("535"),
        "{problem}"
    );
    assert_eq!(
        expect_json(app.get(&format!("{path}/count"), &token).await, 200).await["count"],
        0
    );
}

#[tokio::test]
async fn starttls_and_implicit_tls_work_with_allow_insecure_tls() {
    let app = loopback_app().await;
    let (token, path) = setup(&app).await;
    let starttls = smtp(TlsMode::StartTls, true);
    let mut request = body(&starttls, "s3cret-pass");
    request["requireTLS"] = json!(true);
    request["allowInsecureTLS"] = json!(true);
    let saved = expect_json(
        app.send_json(Method::POST, &path, &token, &request).await,
        200,
    )
    .await;
    assert!(starttls.connection_count() >= 1);
    assert_eq!(saved["credentialsSentInClear"], false);
    assert_eq!(saved["warnings"], json!([]));

    let implicit = smtp(TlsMode::Implicit, true);
    let mut request = body(&implicit, "s3cret-pass");
    request["secure"] = json!(true);
    request["allowInsecureTLS"] = json!(true);
    let saved = expect_json(
        app.send_json(Method::POST, &path, &token, &request).await,
        200,
    )
    .await;
    assert_eq!(saved["secure"], true);

    // The same self-signed server without allowInsecureTLS is refused.
    request["allowInsecureTLS"] = json!(false);
    let problem = expect_problem(
        app.send_json(Method::POST, &path, &token, &request).await,
        400,
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "secure");
    // requireTLS against a server that offers no STARTTLS is refused too.
    let plain = smtp(TlsMode::None, true);
    let mut request = body(&plain, "s3cret-pass");
    request["requireTLS"] = json!(true);
    expect_problem(
        app.send_json(Method::POST, &path, &token, &request).await,
        400,
    )
    .await;
    assert_eq!(
        expect_json(app.get(&format!("{path}/count"), &token).await, 200).await["count"],
        2
    );
}

#[tokio::test]
async fn a_relay_without_auth_saves_with_a_warning() {
    let app = loopback_app().await;
    let (token, path) = setup(&app).await;
    let relay = smtp(TlsMode::None, false);
    let saved = expect_json(
        app.send_json(Method::POST, &path, &token, &body(&relay, ""))
            .await,
        200,
    )
    .await;
    let warnings = saved["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].as_str().expect("text").contains("no AUTH"));
    assert_eq!(
        saved["credentialsSentInClear"], false,
        "no credentials went out"
    );
}

#[tokio::test]
async fn the_default_egress_guard_refuses_loopback_without_connecting() {
    let app = spawn_app().await;
    let (token, path) = setup(&app).await;
    let server = smtp(TlsMode::None, true);
    for host in [
        "127.0.0.1",
        "localhost",
        "::1",
        "10.0.0.1",
        "169.254.169.254",
    ] {
        let mut request = body(&server, "s3cret-pass");
        request["host"] = json!(host);
        let problem = expect_problem(
            app.send_json(Method::POST, &path, &token, &request).await,
            400,
        )
        .await;
        assert_eq!(problem["errors"][0]["field"], "host", "{host}");
        assert!(
            problem["detail"]
                .as_str()
                .expect("detail")
                .contains("not allowed"),
            "{host}: {problem}"
        );
    }
    assert_eq!(
        server.connection_count(),
        0,
        "refused before any connection"
    );
}

#[tokio::test]
async fn update_needs_the_complete_body_and_rechecks() {
    let app = loopback_app().await;
    let (token, path) = setup(&app).await;
    let server = smtp(TlsMode::None, true);
    let created = expect_json(
        app.send_json(Method::POST, &path, &token, &body(&server, "s3cret-pass"))
            .await,
        200,
    )
    .await;
    let id = created["_id"].as_str().expect("id");
    let mut partial = body(&server, "s3cret-pass");
    partial.as_object_mut().expect("object").remove("password");
    let problem = expect_problem(
        app.send_json(Method::PATCH, &format!("{path}/{id}"), &token, &partial)
            .await,
        400,
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "password");
    let mut changed = body(&server, "s3cret-pass");
    changed["defaultFromName"] = json!("Acme Billing");
    let updated = expect_json(
        app.send_json(Method::PATCH, &format!("{path}/{id}"), &token, &changed)
            .await,
        200,
    )
    .await;
    assert_eq!(updated["defaultFromName"], "Acme Billing");
    assert_eq!(updated["password"], "");
    assert_eq!(updated["createDate"], created["createDate"]);
    let wrong = body(&server, "wrong");
    expect_problem(
        app.send_json(Method::PATCH, &format!("{path}/{id}"), &token, &wrong)
            .await,
        400,
    )
    .await;
    let kept = expect_json(app.get(&format!("{path}/{id}"), &token).await, 200).await;
    assert_eq!(
        kept["defaultFromName"], "Acme Billing",
        "a failed check changes nothing"
    );
    let before = server.connection_count();
    expect_problem(
        app.send_json(
            Method::PATCH,
            &format!("{path}/01936c5e-7b2a-7cde-8f00-0123456789ab"),
            &token,
            &changed,
        )
        .await,
        404,
    )
    .await;
    assert_eq!(
        server.connection_count(),
        before,
        "an unknown server is not probed"
    );
}

#[tokio::test]
async fn invalid_settings_are_400_before_any_connection() {
    let app = loopback_app().await;
    let (token, path) = setup(&app).await;
    let server = smtp(TlsMode::None, true);
    for (key, value) in [
        ("port", json!(0)),
        ("port", json!(70000)),
        ("port", json!("25")),
        ("host", json!("bad host")),
        ("defaultFromEmail", json!("nope")),
        ("secure", json!(null)),
        ("serviceType", json!("")),
    ] {
        let mut request = body(&server, "s3cret-pass");
        request[key] = value.clone();
        let problem = expect_problem(
            app.send_json(Method::POST, &path, &token, &request).await,
            400,
        )
        .await;
        assert_eq!(
            problem["errors"][0]["field"], key,
            "{key}={value}: {problem}"
        );
    }
    assert_eq!(server.connection_count(), 0);
}

#[tokio::test]
async fn delete_is_refused_while_a_template_prefers_the_server() {
    let app = loopback_app().await;
    let (token, path) = setup(&app).await;
    let server = smtp(TlsMode::None, true);
    let id = expect_json(
        app.send_json(Method::POST, &path, &token, &body(&server, "s3cret-pass"))
            .await,
        200,
    )
    .await["_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let templates = path.replace("mail-servers", "templates");
    let template = json!({"name": "T", "slug": "t", "subject": "S", "content": "C", "preferredEmailServer": id});
    let created = expect_json(
        app.send_json(Method::POST, &templates, &token, &template)
            .await,
        200,
    )
    .await;
    assert_eq!(created["preferredEmailServer"], id.as_str());
    let problem = expect_problem(
        app.request(Method::DELETE, &format!("{path}/{id}"), Some(&token))
            .send()
            .await
            .expect("sent"),
        400,
    )
    .await;
    assert!(
        problem["detail"].as_str().expect("detail").contains('t'),
        "{problem}"
    );
    let template_id = created["_id"].as_str().expect("id");
    expect_json(
        app.send_json(
            Method::PATCH,
            &format!("{templates}/{template_id}"),
            &token,
            &json!({"preferredEmailServer": null}),
        )
        .await,
        200,
    )
    .await;
    expect_json(
        app.request(Method::DELETE, &format!("{path}/{id}"), Some(&token))
            .send()
            .await
            .expect("sent"),
        200,
    )
    .await;
    expect_problem(app.get(&format!("{path}/{id}"), &token).await, 404).await;
}

#[tokio::test]
async fn a_preferred_server_must_belong_to_the_account() {
    let app = loopback_app().await;
    let (token, path) = setup(&app).await;
    let server = smtp(TlsMode::None, true);
    let id = expect_json(
        app.send_json(Method::POST, &path, &token, &body(&server, "s3cret-pass"))
            .await,
        200,
    )
    .await["_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let other = app.create_account(&token, "Other").await;
    let template = json!({"name": "T", "slug": "t", "subject": "S", "content": "C", "preferredEmailServer": id});
    let problem = expect_problem(
        app.send_json(
            Method::POST,
            &format!("/v2/accounts/{other}/templates"),
            &token,
            &template,
        )
        .await,
        400,
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "preferredEmailServer");
    let unknown = json!({"name": "T", "slug": "t", "subject": "S", "content": "C", "preferredEmailServer": "01936c5e-7b2a-7cde-8f00-0123456789ab"});
    expect_problem(
        app.send_json(
            Method::POST,
            &format!("/v2/accounts/{other}/templates"),
            &token,
            &unknown,
        )
        .await,
        400,
    )
    .await;
    expect_problem(
        app.get(&format!("/v2/accounts/{other}/mail-servers/{id}"), &token)
            .await,
        404,
    )
    .await;
}

/// Resident or peak resident memory of this process (the server runs in it), in KiB.
fn memory_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/self/status"))
}

fn hostile_body(server: &HostileSmtpServer) -> Value {
    json!({
        "serviceType": "smtp", "host": "127.0.0.1", "port": server.port(),
        "secure": false, "requireTLS": false, "user": "mailer", "password": "pw",
        "defaultFromEmail": "hello@example.com", "defaultFromName": "Acme"
    })
}

#[tokio::test]
async fn a_server_streaming_1_gib_without_a_newline_is_400_within_35_s_and_rss_grows_at_most_32_mib(
) {
    let app = loopback_app().await;
    let (token, path) = setup(&app).await;
    const GIB: u64 = 1 << 30;
    // The EHLO reply is `250 ` and then a gibibyte without a newline.
    let server = HostileSmtpServer::start(Some(0), Hostility::Stream { bytes: GIB });
    let rss_before = memory_kib("VmRSS:");
    let started = Instant::now();
    let problem = expect_problem(
        app.send_json(Method::POST, &path, &token, &hostile_body(&server))
            .await,
        400,
    )
    .await;
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_secs(35),
        "answered after {elapsed:?}"
    );
    let peak_growth_kib = memory_kib("VmHWM:").saturating_sub(rss_before);
    println!(
        "answered in {elapsed:?}; peak RSS growth {peak_growth_kib} KiB; {} hostile bytes sent",
        server.hostile_bytes_sent()
    );
    assert!(
        peak_growth_kib <= 32 * 1024,
        "peak RSS grew by {peak_growth_kib} KiB (bound: 32 MiB)"
    );
    assert!(
        problem["errors"][0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("longer than 4096 bytes"),
        "{problem}"
    );
    assert_eq!(problem["errors"][0]["field"], "host", "{problem}");
    assert!(
        server.hostile_bytes_sent() < GIB / 16,
        "the probe stopped reading: {} bytes were sent",
        server.hostile_bytes_sent()
    );
    assert_eq!(
        expect_json(app.get(&path, &token).await, 200).await["items"],
        json!([])
    );
}

#[tokio::test]
async fn a_server_dripping_a_byte_a_second_is_400_within_35_s() {
    let app = loopback_app().await;
    let (token, path) = setup(&app).await;
    // The greeting comes one byte a second (`222xxx…`, never a newline).
    let server = HostileSmtpServer::start(
        None,
        Hostility::Drip {
            every: Duration::from_secs(1),
            bytes: 120,
        },
    );
    let started = Instant::now();
    let problem = expect_problem(
        app.send_json(Method::POST, &path, &token, &hostile_body(&server))
            .await,
        400,
    )
    .await;
    let elapsed = started.elapsed();
    // The service's probe gives each step 10 s, and the whole check 30 s.
    println!("answered after {elapsed:?}");
    assert!(
        elapsed >= Duration::from_secs(9) && elapsed < Duration::from_secs(35),
        "answered after {elapsed:?}, expected the 10 s step timeout (30 s deadline at most)"
    );
    let detail = problem["errors"][0]["message"].as_str().unwrap_or_default();
    assert!(detail.contains("did not answer within"), "{problem}");
    assert!(
        server.hostile_bytes_sent() < 40,
        "{}",
        server.hostile_bytes_sent()
    );
}
