//! A generated hostile-input run: 10,000 requests spread over every documented
//! route, each with a body built from a seeded random generator that knows the route's
//! field names (taken from the OpenAPI document, so values reach the validation behind the
//! JSON parser), wrong types, huge and strange strings, deep nesting, invalid UTF-8,
//! foreign content types, bad ids and bad query parameters. The service must answer every
//! one below 500 and be healthy afterwards. The seed is printed, so a failure replays.

use std::time::Instant;

use mailroom_tests::spawn_app;
use rand::{rngs::StdRng, Rng, SeedableRng};
use reqwest::Method;
use serde_json::{json, Map, Value};

const REQUESTS: usize = 10_000;
const IN_FLIGHT: usize = 8;

struct Route {
    method: Method,
    path: String,
    fields: Vec<String>,
}

/// Every operation of the document with the property names of its JSON body, if any.
fn routes(document: &Value) -> Vec<Route> {
    let schemas = &document["components"]["schemas"];
    let mut routes = Vec::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            let Ok(method) = Method::from_bytes(method.to_uppercase().as_bytes()) else {
                continue;
            };
            let schema = &operation["requestBody"]["content"]["application/json"]["schema"];
            let schema = match schema["$ref"].as_str() {
                Some(reference) => &schemas[reference.rsplit('/').next().unwrap_or_default()],
                None => schema,
            };
            let fields = schema["properties"]
                .as_object()
                .map(|properties| properties.keys().cloned().collect())
                .unwrap_or_default();
            routes.push(Route {
                method,
                path: path.clone(),
                fields,
            });
        }
    }
    routes
}

fn string(rng: &mut StdRng) -> String {
    match rng.gen_range(0..10) {
        0 => "x".repeat(rng.gen_range(1_000..200_000)),
        1 => "{{ a.b.c | upper }}{% for x in y %}{{ x }}{% endfor %}{{".into(),
        2 => "'; DROP TABLE contacts; --".into(),
        3 => "\u{0}\u{1b}[31m\r\nBcc: evil@example.com\r\n".into(),
        4 => "😀".repeat(rng.gen_range(1..3_000)),
        5 => "01936c5e-7b2a-7cde-8f00-0123456789ab".into(),
        6 => "ada@example.com".into(),
        7 => "http://169.254.169.254/latest/meta-data".into(),
        8 => String::new(),
        _ => (0..rng.gen_range(1..40))
            .map(|_| char::from_u32(rng.gen_range(1..0x2_FFFF)).unwrap_or('?'))
            .collect(),
    }
}

fn value(rng: &mut StdRng, depth: u32) -> Value {
    match rng.gen_range(0..if depth > 3 { 6 } else { 8 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.gen()),
        2 => json!(rng.gen::<i64>()),
        3 => json!(rng.gen_range(-3.0e9..3.0e9)),
        4 | 5 => Value::String(string(rng)),
        6 => Value::Array(
            (0..rng.gen_range(0..5))
                .map(|_| value(rng, depth + 1))
                .collect(),
        ),
        _ => {
            let mut object = Map::new();
            for _ in 0..rng.gen_range(0..5) {
                object.insert(string(rng), value(rng, depth + 1));
            }
            Value::Object(object)
        }
    }
}

/// A body and its content type.
fn body(rng: &mut StdRng, fields: &[String]) -> (Vec<u8>, &'static str) {
    match rng.gen_range(0..10) {
        0 => (
            (0..rng.gen_range(0..2_000)).map(|_| rng.gen()).collect(),
            "application/json",
        ),
        1 => (
            b"{\"name\": \"\xff\xfe\xc3\x28\"}".to_vec(),
            "application/json",
        ),
        2 => (
            b"email=a%40b.c&name=x".to_vec(),
            "application/x-www-form-urlencoded",
        ),
        3 => (
            b"email,name\nnot-an-email,x\n\xff,y\nnul@example.com,a\x00b\n".to_vec(),
            "text/csv",
        ),
        4 => {
            // Deep nesting under a real field name, written as text: a `Value` this deep
            // would overflow the test's own stack when serialised or dropped.
            let levels = rng.gen_range(100..5_000);
            let field = fields.first().map_or("name", String::as_str);
            let text = format!(
                "{{\"{field}\": {}null{}}}",
                "[".repeat(levels),
                "]".repeat(levels)
            );
            (text.into_bytes(), "application/json")
        }
        _ => {
            let mut object = Map::new();
            for field in fields {
                if rng.gen_bool(0.7) {
                    object.insert(field.clone(), value(rng, 0));
                }
            }
            if rng.gen_bool(0.1) {
                object.insert(string(rng), value(rng, 0));
            }
            (
                serde_json::to_vec(&Value::Object(object)).expect("json"),
                "application/json",
            )
        }
    }
}

fn segment(rng: &mut StdRng, account: &str, name: &str) -> String {
    let roll = rng.gen_range(0..10);
    if name == "{accountId}" && roll < 8 {
        return account.to_owned();
    }
    match roll {
        0 => "01936c5e-7b2a-7cde-8f00-0123456789ab".into(),
        1 => "%00".into(),
        2 => "..%2F..%2F".into(),
        3 => "%F0%9F%98%80".into(),
        4 => "9".repeat(300),
        5 => "%ff%fe".into(),
        _ => uuid_like(rng),
    }
}

fn uuid_like(rng: &mut StdRng) -> String {
    let bytes: [u8; 16] = rng.gen();
    let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

fn query(rng: &mut StdRng) -> String {
    let pairs = [
        "start=-1",
        "start=18446744073709551616",
        "limit=0",
        "limit=abc",
        "status=%00",
        "status=queued",
        "contactId=nope",
        "sortBy=email&order=-1",
        "search=%25%5F",
        "email=%zz",
        "start=1e3",
        "limit=1000000",
        "search=a%00b",
        "email=a%00%40b.c",
        "status=%00",
    ];
    let chosen: Vec<&str> = (0..rng.gen_range(0..4))
        .map(|_| pairs[rng.gen_range(0..pairs.len())])
        .collect();
    if chosen.is_empty() {
        String::new()
    } else {
        format!("?{}", chosen.join("&"))
    }
}

#[tokio::test]
async fn ten_thousand_generated_hostile_requests_get_no_5xx() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let account = app.create_account(&token, "Acme").await;
    let document: Value = app
        .client
        .get(format!("{}/v2/openapi.json", app.address))
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    let routes = routes(&document);
    assert!(routes.len() >= 60, "{} routes", routes.len());
    let seed: u64 = std::env::var("MAILROOM_FUZZ_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen());
    println!("seed {seed} (set MAILROOM_FUZZ_SEED to replay)");
    let mut rng = StdRng::seed_from_u64(seed);
    let started = Instant::now();
    let mut running = tokio::task::JoinSet::new();
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for n in 0..REQUESTS {
        let route = &routes[n % routes.len()];
        let path: Vec<String> = route
            .path
            .split('/')
            .map(|part| {
                if part.starts_with('{') {
                    segment(&mut rng, &account, part)
                } else {
                    part.to_owned()
                }
            })
            .collect();
        let url = format!("{}{}", path.join("/"), query(&mut rng));
        let mut request = app.request(route.method.clone(), &url, Some(&token));
        let mut label = format!("{} {url}", route.method);
        if route.method != Method::GET {
            let (bytes, content_type) = body(&mut rng, &route.fields);
            let preview: String = String::from_utf8_lossy(&bytes).chars().take(300).collect();
            label.push_str(&format!(" ({content_type}) {preview}"));
            request = request.header("content-type", content_type).body(bytes);
        }
        running.spawn(async move {
            let response = request.send().await.expect("sent");
            let status = response.status().as_u16();
            let text = if status >= 500 {
                response.text().await.unwrap_or_default()
            } else {
                String::new()
            };
            (label, status, text)
        });
        while running.len() >= IN_FLIGHT {
            let (label, status, text) = running.join_next().await.expect("task").expect("join");
            assert!(
                status < 500,
                "seed {seed}: {label} answered {status}: {text}"
            );
            *statuses.entry(status).or_default() += 1;
        }
    }
    while let Some(done) = running.join_next().await {
        let (label, status, text) = done.expect("join");
        assert!(
            status < 500,
            "seed {seed}: {label} answered {status}: {text}"
        );
        *statuses.entry(status).or_default() += 1;
    }
    println!(
        "{REQUESTS} requests over {} routes in {:.1} s; statuses {statuses:?}",
        routes.len(),
        started.elapsed().as_secs_f64()
    );
    let health = app
        .client
        .get(format!("{}/readyz", app.address))
        .send()
        .await
        .expect("sent");
    assert_eq!(health.status(), 200, "healthy afterwards");
}
