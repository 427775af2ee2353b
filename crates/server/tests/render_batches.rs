//! Render children take requests in batches (one write, one read of the replies) and the
//! outcomes come back in order; a request that kills its child fails alone, the rest of
//! its batch rendered again on fresh children; a template the child did not keep is sent
//! again (`crates/server/src/render_sandbox.rs`, docs/operations.md "Delivery engine").

use std::{
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use mailroom_app::rendering::{
    AccountDefaults, MessageLinks, Recipient, RenderRequest, SendData, ServerDefaults,
    TemplateFields,
};
use mailroom_server::render_sandbox::{
    RenderSandbox, Rendered, BATCH_REQUESTS, CACHED_TEMPLATE_BYTES, SANDBOX_CPU_SECONDS,
};

const MAILROOM: &str = env!("CARGO_BIN_EXE_mailroom");

/// 100,000,000 bytes, then doubled six times: 6.4 GB if nothing stops it.
const MEMORY_BOMB: &str = "{% set x = \"x\" * 100000000 %}{% set x = x ~ x %}{% set x = x ~ x %}\
{% set x = x ~ x %}{% set x = x ~ x %}{% set x = x ~ x %}{% set x = x ~ x %}{{ x | length }}";

fn template(content: &str) -> Arc<TemplateFields> {
    Arc::new(TemplateFields {
        subject: "Hi {{ email }}".into(),
        content: content.into(),
        text_content: None,
        from_name: None,
        from_email: Some("from@example.org".into()),
        cc: None,
        bcc: None,
        rcpt_name: None,
        reply_to: None,
        click_tracking: None,
        open_tracking: None,
    })
}

fn request(template: &Arc<TemplateFields>, email: &str) -> RenderRequest {
    RenderRequest {
        template: Arc::clone(template),
        template_digest: Some(Arc::from(template.digest())),
        account: AccountDefaults {
            click_tracking: false,
            open_tracking: false,
        },
        server: ServerDefaults {
            default_from_email: "server@example.org".into(),
            default_from_name: String::new(),
        },
        recipient: Recipient {
            email: email.into(),
            attributes: serde_json::Map::new(),
        },
        data: SendData::new(),
        links: MessageLinks::default(),
    }
}

fn sandbox() -> RenderSandbox {
    RenderSandbox::new(PathBuf::from(MAILROOM), 2)
}

#[test]
fn outcomes_come_back_in_order_and_a_bomb_fails_alone() {
    let greeting = template("<p>Hello {{ email }}</p>");
    let news = template("<p>News for {{ email }}</p>");
    let bomb = template(MEMORY_BOMB);
    // More than one batch, the bomb in the middle of the first.
    let count = BATCH_REQUESTS + 8;
    let requests: Vec<RenderRequest> = (0..count)
        .map(|n| {
            let email = format!("reader-{n}@example.org");
            match n {
                5 => request(&bomb, &email),
                n if n % 2 == 0 => request(&greeting, &email),
                _ => request(&news, &email),
            }
        })
        .collect();
    let refs: Vec<&RenderRequest> = requests.iter().collect();
    let sandbox = sandbox();
    let outcomes = sandbox.render_all(&refs);
    assert_eq!(outcomes.len(), count);
    for (n, outcome) in outcomes.into_iter().enumerate() {
        let outcome = outcome.expect("a render child started");
        if n == 5 {
            let reason = outcome.expect_err("the bomb fails");
            assert!(reason.contains("render process ended"), "{reason}");
            continue;
        }
        let html = outcome
            .unwrap_or_else(|reason| panic!("message {n}: {reason}"))
            .html;
        let expected = if n % 2 == 0 { "Hello" } else { "News for" };
        assert_eq!(html, format!("<p>{expected} reader-{n}@example.org</p>"));
    }
    // The children the bomb left behind render the next batch as usual.
    let again = sandbox.render_all(&[&request(&greeting, "after@example.org")]);
    assert_eq!(
        again[0].clone().expect("started").expect("rendered").html,
        "<p>Hello after@example.org</p>"
    );
}

#[test]
fn a_template_the_child_did_not_keep_is_sent_again() {
    // Past the children's cache bound: compiled for each render and never kept, so a
    // child asked for it by digest answers that it does not hold it.
    // (Its bulk is never rendered: a message renders to at most 2 MiB.)
    let large = template(&format!(
        "<p>{{{{ email }}}}</p>{{% if false %}}{}{{% endif %}}",
        "x".repeat(CACHED_TEMPLATE_BYTES + 1)
    ));
    let small = template("<p>small {{ email }}</p>");
    // One child, so the second batch goes to the child that was sent the fields.
    let sandbox = RenderSandbox::new(PathBuf::from(MAILROOM), 1);
    let first = sandbox.render_all(&[&request(&large, "one@example.org")]);
    assert!(first[0].clone().expect("started").is_ok());
    let second_requests = [
        request(&large, "two@example.org"),
        request(&small, "three@example.org"),
        request(&large, "four@example.org"),
    ];
    let refs: Vec<&RenderRequest> = second_requests.iter().collect();
    let outcomes = sandbox.render_all(&refs);
    let html: Vec<String> = outcomes
        .into_iter()
        .map(|outcome| outcome.expect("started").expect("rendered").html)
        .collect();
    assert_eq!(html[0], "<p>two@example.org</p>");
    assert_eq!(html[1], "<p>small three@example.org</p>");
    assert_eq!(html[2], "<p>four@example.org</p>");
}

/// A template whose every loop turn costs a tenth of a second or more of CPU in one
/// instruction (`"x" * 50000000`, then `upper` over it): 1,000 turns use about 5,000 of
/// the 50,000 fuel a field may, and minutes of CPU.
const SLOW: &str =
    "{% for i in range(1000) %}{% set y = (\"x\" * 50000000) | upper %}{% endfor %}done";

#[test]
fn a_render_past_a_1_s_deadline_fails_alone_about_time_and_its_template_is_not_rendered_again() {
    let greeting = template("<p>Hello {{ email }}</p>");
    let slow = template(SLOW);
    let requests: Vec<RenderRequest> = (0..12)
        .map(|n| {
            let email = format!("reader-{n}@example.org");
            match n {
                3 | 8 => request(&slow, &email),
                _ => request(&greeting, &email),
            }
        })
        .collect();
    let refs: Vec<&RenderRequest> = requests.iter().collect();
    let sandbox =
        RenderSandbox::new(PathBuf::from(MAILROOM), 1).with_deadline(Duration::from_secs(1));
    let started = Instant::now();
    let outcomes = sandbox.render_all(&refs);
    let took = started.elapsed();
    assert_eq!(outcomes.len(), requests.len());
    for (n, outcome) in outcomes.into_iter().enumerate() {
        let outcome = outcome.expect("a render child started");
        match n {
            3 => {
                let reason = outcome.expect_err("the slow render fails");
                assert!(reason.contains("took longer than 1 s"), "{reason}");
                assert!(!reason.contains("not rendered again"), "{reason}");
            }
            8 => {
                let reason = outcome.expect_err("the slow template's other message fails");
                assert!(reason.contains("took longer than 1 s"), "{reason}");
                assert!(reason.contains("not rendered again"), "{reason}");
            }
            _ => assert_eq!(
                outcome
                    .unwrap_or_else(|reason| panic!("message {n}: {reason}"))
                    .html,
                format!("<p>Hello reader-{n}@example.org</p>")
            ),
        }
    }
    // One deadline for the template, not one per message: well under two.
    assert!(
        took < Duration::from_millis(1900),
        "12 renders, two of a slow template, took {took:?}"
    );
}

#[test]
fn a_render_child_refuses_to_run_without_a_cpu_time_limit() {
    // The address-space bound alone, as before there was a CPU-time one.
    let output = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg("ulimit -v 524288 && exec \"$0\" render-sandbox")
        .arg(MAILROOM)
        .env_clear()
        .stdin(std::process::Stdio::null())
        .output()
        .expect("running render-sandbox");
    assert!(!output.status.success(), "{:?}", output.status);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("CPU-time limit"), "{stderr}");
    // With both it runs (and ends when its input closes).
    let output = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 524288 && ulimit -t {SANDBOX_CPU_SECONDS} && exec \"$0\" render-sandbox"
        ))
        .arg(MAILROOM)
        .env_clear()
        .stdin(std::process::Stdio::null())
        .output()
        .expect("running render-sandbox");
    assert!(output.status.success(), "{output:?}");
}

#[test]
fn past_a_budget_of_1_mb_the_rest_of_a_claim_is_deferred_unrendered() {
    // 300,000 bytes each: the fourth takes the claim past 1,000,000 bytes.
    let large = template("{{ 'x' * 300000 }}");
    let requests: Vec<RenderRequest> = (0..10)
        .map(|n| request(&large, &format!("reader-{n}@example.org")))
        .collect();
    let refs: Vec<&RenderRequest> = requests.iter().collect();
    let sandbox = sandbox();
    let outcomes = sandbox.render_within(&refs, 1_000_000);
    let rendered = outcomes
        .iter()
        .take_while(|outcome| matches!(outcome, Rendered::Done(Ok(_))))
        .count();
    assert_eq!(rendered, 4, "{outcomes:?}");
    assert!(
        outcomes[4..]
            .iter()
            .all(|outcome| matches!(outcome, Rendered::Deferred)),
        "{outcomes:?}"
    );
    // The child that was still rendering them is gone; a fresh one renders the next claim.
    let again = sandbox.render_all(&[&request(&large, "after@example.org")]);
    assert_eq!(
        again[0]
            .clone()
            .expect("started")
            .expect("rendered")
            .html
            .len(),
        300_000
    );
}

#[test]
fn a_reply_past_4_mib_once_encoded_fails_as_too_large() {
    // 2,000,000 control characters fit the 2 MiB message bound, but each is encoded as
    // six bytes (`\u0001`) on its way back: 12 MB.
    let controls = template("{{ c * 2000000 }}");
    let mut heavy = request(&controls, "controls@example.org");
    heavy.data.insert(
        "c".to_owned(),
        serde_json::Value::String("\u{1}".to_owned()),
    );
    let greeting = template("<p>Hello {{ email }}</p>");
    let after = request(&greeting, "after@example.org");
    let outcomes = sandbox().render_all(&[&heavy, &after]);
    let reason = outcomes[0]
        .clone()
        .expect("started")
        .expect_err("too large once encoded");
    assert!(reason.contains("too large"), "{reason}");
    assert_eq!(
        outcomes[1]
            .clone()
            .expect("started")
            .expect("rendered")
            .html,
        "<p>Hello after@example.org</p>"
    );
}
