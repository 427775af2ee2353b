use std::fmt::Write;

use mailroom_tests::{expect_json, expect_problem, spawn_app, TestApp};
use reqwest::{Method, Response};
use serde_json::{json, Value};

async fn import(
    app: &TestApp,
    token: &str,
    account: &str,
    content_type: &str,
    body: String,
) -> Response {
    app.request(
        Method::POST,
        &format!("/v2/accounts/{account}/contacts/import"),
        Some(token),
    )
    .header("content-type", content_type)
    .body(body)
    .send()
    .await
    .expect("request sent")
}

/// The contact with this email, with its resolved attributes.
async fn contact(app: &TestApp, token: &str, account: &str, email: &str) -> Value {
    let list = expect_json(
        app.get(
            &format!("/v2/accounts/{account}/contacts?email={email}"),
            token,
        )
        .await,
        200,
    )
    .await;
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{email}: {list}");
    let id = items[0]["_id"].as_str().expect("id");
    expect_json(
        app.get(&format!("/v2/accounts/{account}/contacts/{id}"), token)
            .await,
        200,
    )
    .await
}

async fn contact_count(app: &TestApp, token: &str, account: &str) -> u64 {
    expect_json(
        app.get(&format!("/v2/accounts/{account}/contacts/count"), token)
            .await,
        200,
    )
    .await["count"]
        .as_u64()
        .expect("count")
}

const SAMPLE: &str = "\
email,plan,score,vip,renewal,name
ada@example.com,pro,10,true,2026-03-01T00:00:00Z,Ada
not-an-email,pro,1,false,,X
bob@example.com,free,5
cy@example.com,free,abc,false,,Cy
dee@example.com,,7,,,\"Dee, Jr.\"
ada@example.com,team,,,,
eve@example.com,123,8,false,,Eve
";

#[tokio::test]
async fn an_import_applies_good_rows_and_reports_bad_ones_by_line() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;

    let report = expect_json(
        import(&app, &token, &account, "text/csv", SAMPLE.into()).await,
        200,
    )
    .await;
    assert_eq!(report["created"], 3, "{report}");
    assert_eq!(
        report["updated"], 1,
        "the second ada row updates the first: {report}"
    );
    assert_eq!(report["rejected"], 3, "{report}");
    let errors = report["errors"].as_array().expect("errors");
    let lines: Vec<u64> = errors
        .iter()
        .map(|e| e["line"].as_u64().expect("line"))
        .collect();
    assert_eq!(lines, vec![3, 4, 5], "{report}");
    assert!(
        errors[0]["reason"]
            .as_str()
            .expect("reason")
            .contains("email"),
        "{report}"
    );
    assert!(
        errors[1]["reason"]
            .as_str()
            .expect("reason")
            .contains("columns"),
        "{report}"
    );
    assert!(
        errors[2]["reason"]
            .as_str()
            .expect("reason")
            .contains("score"),
        "{report}"
    );

    let ada = contact(&app, &token, &account, "ada@example.com").await;
    let attributes = &ada["attributes"];
    assert_eq!(attributes["plan"], "team", "the later row wins: {ada}");
    assert_eq!(
        attributes["score"], 10.0,
        "an empty cell keeps the value: {ada}"
    );
    assert_eq!(attributes["vip"], true);
    assert_eq!(attributes["renewal"], "2026-03-01T00:00:00.000Z");
    assert_eq!(attributes["name"], "Ada");
    let dee = contact(&app, &token, &account, "dee@example.com").await;
    assert_eq!(
        dee["attributes"]["name"], "Dee, Jr.",
        "quoted cells keep their comma"
    );
    assert!(
        dee["attributes"].get("plan").is_none(),
        "an empty cell writes nothing: {dee}"
    );
    let eve = contact(&app, &token, &account, "eve@example.com").await;
    assert_eq!(
        eve["attributes"]["plan"], "123",
        "a string slug keeps digits as text: {eve}"
    );
    assert_eq!(contact_count(&app, &token, &account).await, 3);

    let metas = expect_json(
        app.get(&format!("/v2/accounts/{account}/attributes"), &token)
            .await,
        200,
    )
    .await;
    let type_of = |slug: &str| {
        metas["items"]
            .as_array()
            .expect("items")
            .iter()
            .find(|meta| meta["slug"] == slug)
            .map(|meta| meta["type"].clone())
    };
    assert_eq!(type_of("plan"), Some(json!("string")));
    assert_eq!(type_of("score"), Some(json!("number")));
    assert_eq!(type_of("vip"), Some(json!("boolean")));
    assert_eq!(type_of("renewal"), Some(json!("date")));

    // The same file again creates nothing: every good row is an update.
    let again = expect_json(
        import(
            &app,
            &token,
            &account,
            "text/csv; charset=utf-8",
            SAMPLE.into(),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(
        (&again["created"], &again["updated"], &again["rejected"]),
        (&json!(0), &json!(4), &json!(3)),
        "{again}"
    );
    assert_eq!(contact_count(&app, &token, &account).await, 3);
}

#[tokio::test]
async fn the_sort_key_follows_an_imported_name() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    let first = "email,name\nb@example.com,Zed\na@example.com,Bea\n";
    expect_json(
        import(&app, &token, &account, "text/csv", first.into()).await,
        200,
    )
    .await;
    // Renaming an existing contact moves it in the name order.
    let second = "email,name\nb@example.com,Al\n";
    expect_json(
        import(&app, &token, &account, "text/csv", second.into()).await,
        200,
    )
    .await;
    let list = expect_json(
        app.get(
            &format!("/v2/accounts/{account}/contacts?sortBy=name"),
            &token,
        )
        .await,
        200,
    )
    .await;
    let emails: Vec<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|c| c["email"].as_str().expect("email"))
        .collect();
    assert_eq!(emails, vec!["b@example.com", "a@example.com"], "{list}");
}

#[tokio::test]
async fn a_bad_request_writes_nothing() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    let rows = "ada@example.com,pro\n";
    expect_problem(
        import(
            &app,
            &token,
            &account,
            "application/json",
            format!("email,plan\n{rows}"),
        )
        .await,
        400,
    )
    .await;
    expect_problem(
        import(
            &app,
            &token,
            &account,
            "text/plain",
            format!("email,plan\n{rows}"),
        )
        .await,
        400,
    )
    .await;
    let missing = expect_problem(
        import(
            &app,
            &token,
            &account,
            "text/csv",
            format!("mail,plan\n{rows}"),
        )
        .await,
        400,
    )
    .await;
    assert_eq!(missing["errors"][0]["field"], "header", "{missing}");
    expect_problem(
        import(
            &app,
            &token,
            &account,
            "text/csv",
            format!("email,plan,plan\n{rows}"),
        )
        .await,
        400,
    )
    .await;
    expect_problem(
        import(
            &app,
            &token,
            &account,
            "text/csv",
            format!("email,first-name\n{rows}"),
        )
        .await,
        400,
    )
    .await;
    expect_problem(
        import(
            &app,
            &token,
            &account,
            "text/csv",
            format!("email,create_date\n{rows}"),
        )
        .await,
        400,
    )
    .await;
    expect_problem(
        import(&app, &token, &account, "text/csv", String::new()).await,
        400,
    )
    .await;
    assert_eq!(contact_count(&app, &token, &account).await, 0);

    let stranger = app.user_token("mallory@example.com").await;
    expect_problem(
        import(
            &app,
            &stranger,
            &account,
            "text/csv",
            format!("email,plan\n{rows}"),
        )
        .await,
        401,
    )
    .await;
    assert_eq!(contact_count(&app, &token, &account).await, 0);
}

#[tokio::test]
async fn a_large_import_is_applied_in_batches() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    const ROWS: usize = 20_000;
    const BAD: usize = 12_345;
    // Over 1 MiB: the import is exempt from the JSON body limit.
    let mut body = String::from("\u{feff}email,plan,score,vip,city\n");
    for i in 0..ROWS {
        let email = if i == BAD {
            "broken".to_owned()
        } else {
            format!("user{i}@example.com")
        };
        let plan = ["free", "pro", "team"][i % 3];
        writeln!(
            body,
            "{email},{plan},{},{},City number {} of the generated test audience",
            i % 1000,
            i % 2 == 0,
            i % 50
        )
        .expect("write");
    }
    // Repeats of early rows, applied after their batch committed.
    for i in 0..3 {
        writeln!(body, "USER{i}@example.com,team,,,").expect("write");
    }
    assert!(body.len() > 1024 * 1024);
    let report = expect_json(import(&app, &token, &account, "text/csv", body).await, 200).await;
    assert_eq!(report["created"], ROWS - 1, "{}", report["errors"]);
    assert_eq!(report["updated"], 3);
    assert_eq!(report["rejected"], 1);
    assert_eq!(
        report["errors"][0]["line"],
        BAD + 2,
        "header is line 1, row 0 line 2"
    );
    assert_eq!(
        contact_count(&app, &token, &account).await,
        (ROWS - 1) as u64
    );
    let first = contact(&app, &token, &account, "user0@example.com").await;
    assert_eq!(first["attributes"]["plan"], "team", "{first}");
    assert_eq!(first["attributes"]["vip"], true);
    let last = contact(
        &app,
        &token,
        &account,
        &format!("user{}@example.com", ROWS - 1),
    )
    .await;
    assert_eq!(
        last["attributes"]["score"],
        ((ROWS - 1) % 1000) as f64,
        "{last}"
    );
}

#[tokio::test]
async fn rejected_rows_name_the_line_they_start_on() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    // A quoted cell may span lines, and a row that is not UTF-8 is rejected alone.
    let mut body = b"email,note\na@example.com,\"two\nlines\"\n".to_vec();
    body.extend_from_slice(b"\xff@example.com,x\nb@example.com,ok\nbad,x\n");
    let response = app
        .request(
            Method::POST,
            &format!("/v2/accounts/{account}/contacts/import"),
            Some(&token),
        )
        .header("content-type", "text/csv")
        .body(body)
        .send()
        .await
        .expect("request sent");
    let report = expect_json(response, 200).await;
    assert_eq!(report["created"], 2, "{report}");
    let lines: Vec<u64> = report["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| e["line"].as_u64().expect("line"))
        .collect();
    assert_eq!(lines, vec![4, 6], "{report}");
    let a = contact(&app, &token, &account, "a@example.com").await;
    assert_eq!(a["attributes"]["note"], "two\nlines");
}

/// `VmRSS` and `VmHWM` (peak) of this process, in KiB. nextest runs each test in its own
/// process, and the API runs in it, so these are the server's figures.
fn memory_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").expect("proc status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("field")
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Sends an import of `length` bytes made by repeating `first` once then `filler`,
/// written chunk by chunk over a raw connection (never held whole), and returns the
/// status line and body of the answer.
async fn streamed_import(
    app: &TestApp,
    token: &str,
    account: &str,
    first: &[u8],
    filler: u8,
    length: usize,
) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = app.address.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let head = format!(
        "POST /v2/accounts/{account}/contacts/import HTTP/1.1\r\nHost: {address}\r\n\
         Authorization: Bearer {token}\r\nContent-Type: text/csv\r\n\
         Content-Length: {length}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    let (mut reader, mut writer) = stream.into_split();
    let first = first.to_vec();
    let sending = tokio::spawn(async move {
        let chunk = vec![filler; 64 * 1024];
        writer.write_all(&first).await?;
        let mut left = length - first.len();
        while left > 0 {
            let n = left.min(chunk.len());
            writer.write_all(&chunk[..n]).await?;
            left -= n;
        }
        writer.flush().await
    });
    let mut answer = Vec::new();
    reader.read_to_end(&mut answer).await.expect("answer");
    sending
        .await
        .expect("sender")
        .expect("the whole body was accepted");
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("status");
    let body = answer
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    (status, body)
}

const MIB: usize = 1024 * 1024;

#[tokio::test]
async fn a_100_mib_record_of_commas_is_a_400_naming_64_kib_and_memory_stays_under_256_mib() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    let (rss_before, _) = memory_kib();
    let (status, body) =
        streamed_import(&app, &token, &account, b"email,plan\n", b',', 100 * MIB).await;
    let (rss_after, peak) = memory_kib();
    eprintln!("100 MiB of commas: RSS {rss_before} -> {rss_after} KiB, peak {peak} KiB");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("64 KiB") && body.contains("line 2"), "{body}");
    assert!(
        peak < 256 * 1024,
        "peak RSS {peak} KiB (before {rss_before}, after {rss_after})"
    );
    // Still healthy: a normal import works.
    let ok = import(
        &app,
        &token,
        &account,
        "text/csv",
        "email\na@example.org\n".into(),
    )
    .await;
    assert_eq!(expect_json(ok, 200).await["created"], 1);
}

#[tokio::test]
async fn a_100_000_column_header_is_a_4xx_and_memory_stays_under_256_mib() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    let mut header = String::from("email");
    for n in 0..100_000 {
        write!(header, ",c{n}").expect("write");
    }
    header.push('\n');
    let length = header.len() + 10 * MIB;
    let (status, body) =
        streamed_import(&app, &token, &account, header.as_bytes(), b'\n', length).await;
    let (rss_after, peak) = memory_kib();
    eprintln!("100,000-column header: RSS after {rss_after} KiB, peak {peak} KiB");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("64 KiB"), "{body}");
    assert!(peak < 256 * 1024, "peak RSS {peak} KiB");
    let ok = import(
        &app,
        &token,
        &account,
        "text/csv",
        "email\na@example.org\n".into(),
    )
    .await;
    assert_eq!(expect_json(ok, 200).await["created"], 1);
}

#[tokio::test]
async fn more_than_200_columns_is_a_400_naming_the_limit_and_200_are_accepted() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    let header = |columns: usize| {
        let mut text = String::from("email");
        for n in 1..columns {
            write!(text, ",c{n}").expect("write");
        }
        text.push_str("\na@example.org");
        text.push_str(&",x".repeat(columns - 1));
        text + "\n"
    };
    let problem = expect_problem(
        import(&app, &token, &account, "text/csv", header(201)).await,
        400,
    )
    .await;
    assert!(
        problem.to_string().contains("201 columns; at most 200"),
        "{problem}"
    );
    let accepted = import(&app, &token, &account, "text/csv", header(200)).await;
    assert_eq!(expect_json(accepted, 200).await["created"], 1);
}

#[tokio::test]
async fn every_repeated_column_of_a_200_column_header_is_named() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    let mut body = String::from("email");
    for n in 1..200 {
        write!(body, ",c{}", n % 100).expect("write");
    }
    body.push_str("\na@example.org\n");
    let problem = expect_problem(import(&app, &token, &account, "text/csv", body).await, 400).await;
    let repeats = problem["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .filter(|error| {
            error["message"]
                .as_str()
                .is_some_and(|message| message.contains("appears more than once"))
        })
        .count();
    assert_eq!(repeats, 99, "{problem}");
}

#[tokio::test]
async fn at_most_1_000_rejections_are_listed_and_all_are_counted() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    let mut body = String::from("email\n");
    for n in 0..2_500 {
        writeln!(body, "not-an-email-{n}").expect("write");
    }
    let report = expect_json(import(&app, &token, &account, "text/csv", body).await, 200).await;
    assert_eq!(report["rejected"], 2_500);
    let errors = report["errors"].as_array().expect("errors");
    assert_eq!(errors.len(), 1_000);
    assert_eq!(errors[0]["line"], 2);
    assert_eq!(errors[999]["line"], 1_001);
}

/// Starts an import over a raw connection that announces 1 MiB, sends `sent` and then
/// nothing more; answers the status, the body and how long the answer took. The
/// connection stays open (the writer is held) until the answer arrives.
async fn stalled_import(app: &TestApp, token: &str, account: &str, sent: &[u8]) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = app.address.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let head = format!(
        "POST /v2/accounts/{account}/contacts/import HTTP/1.1\r\nHost: {address}\r\n\
         Authorization: Bearer {token}\r\nContent-Type: text/csv\r\n\
         Content-Length: {MIB}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    stream.write_all(sent).await.expect("body");
    let (mut reader, _writer) = stream.into_split();
    let mut answer = vec![0u8; 8192];
    let n = tokio::time::timeout(std::time::Duration::from_secs(20), reader.read(&mut answer))
        .await
        .expect("an answer within 20 s")
        .expect("read");
    let answer = String::from_utf8_lossy(&answer[..n]).into_owned();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("status");
    let body = answer
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    (status, body)
}

#[tokio::test]
async fn an_upload_that_stalls_for_2_s_is_a_408_and_an_account_runs_2_imports_at_once() {
    let app = mailroom_tests::spawn_app_with(|config| {
        config.import_idle_timeout = std::time::Duration::from_secs(2);
    })
    .await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    let other = app.create_account(&token, "Other").await;

    // A header and one row, then silence: 408 about 2 s later, the row before kept out
    // (a stalled upload is not a whole file).
    let started = std::time::Instant::now();
    let (status, body) =
        stalled_import(&app, &token, &account, b"email\nstalled@example.org\n").await;
    let took = started.elapsed();
    assert_eq!(status, 408, "{body}");
    assert!(body.contains("sent nothing for 2 s"), "{body}");
    assert!(took < std::time::Duration::from_secs(6), "{took:?}");
    // Nothing at all after the head: 408 too.
    let (status, body) = stalled_import(&app, &token, &account, b"").await;
    assert_eq!(status, 408, "{body}");

    // Two stalled uploads of one account hold its two slots: a third is a 429 at once,
    // while another account's import goes through.
    let app = std::sync::Arc::new(app);
    let holders: Vec<_> = (0..2)
        .map(|_| {
            let (app, token, account) =
                (std::sync::Arc::clone(&app), token.clone(), account.clone());
            tokio::spawn(async move { stalled_import(&app, &token, &account, b"email\n").await })
        })
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let third = import(
        &app,
        &token,
        &account,
        "text/csv",
        "email\nthird@example.org\n".into(),
    )
    .await;
    let problem = expect_problem(third, 429).await;
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("already runs 2 imports")),
        "{problem}"
    );
    let elsewhere = import(
        &app,
        &token,
        &other,
        "text/csv",
        "email\nother@example.org\n".into(),
    )
    .await;
    assert_eq!(expect_json(elsewhere, 200).await["created"], 1);
    for holder in holders {
        assert_eq!(holder.await.expect("holder").0, 408);
    }
    // The slots are given back.
    let after = import(
        &app,
        &token,
        &account,
        "text/csv",
        "email\nafter@example.org\n".into(),
    )
    .await;
    assert_eq!(expect_json(after, 200).await["created"], 1);
    assert_eq!(
        contact_count(&app, &token, &account).await,
        1,
        "only the whole upload"
    );
}

/// An import whose header would take the account past its 1,000 custom attribute slugs is
/// a 400 on `header` before any row is read; one that names existing slugs still imports.
#[tokio::test]
async fn an_import_whose_header_passes_1000_custom_attributes_is_a_400_and_imports_nothing() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    let attributes: serde_json::Map<String, Value> =
        (0..999).map(|n| (format!("a{n}"), json!(n))).collect();
    expect_json(
        app.send_json(
            Method::POST,
            &format!("/v2/accounts/{account}/contacts"),
            &token,
            &json!({"email": "seed@example.com", "attributes": attributes}),
        )
        .await,
        200,
    )
    .await;
    let refused = expect_problem(
        import(
            &app,
            &token,
            &account,
            "text/csv",
            "email,a1,plan,tier\nnew@example.com,1,pro,gold\n".to_owned(),
        )
        .await,
        400,
    )
    .await;
    assert_eq!(refused["errors"][0]["field"], "header", "{refused}");
    let message = refused["errors"][0]["message"].as_str().expect("message");
    assert!(message.contains("at most 1000"), "{message}");
    assert_eq!(contact_count(&app, &token, &account).await, 1);
    let report = expect_json(
        import(
            &app,
            &token,
            &account,
            "text/csv",
            "email,a1,plan\nnew@example.com,1,pro\n".to_owned(),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(contact_count(&app, &token, &account).await, 2, "{report}");
}
