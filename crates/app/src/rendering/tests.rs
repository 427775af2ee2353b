use mailroom_domain::{
    slug::TemplateSlug,
    template::{ContentType, Template},
    MailServerId, TemplateId, Timestamp, Uuid,
};
use serde_json::json;

use super::*;

/// A template with every field filled; tests override what they exercise.
fn template() -> Template {
    let at = Timestamp::parse("2026-01-02T03:04:05.000Z").expect("valid timestamp");
    Template {
        id: TemplateId::from_uuid(Uuid::nil()),
        name: "Welcome".to_owned(),
        slug: TemplateSlug::parse("welcome").expect("valid slug"),
        subject: "Hello {{ first_name }}".to_owned(),
        content: "<p>Hi {{ first_name }}</p>".to_owned(),
        text_content: Some("Hi {{ first_name }}".to_owned()),
        content_type: ContentType::Html,
        from_name: Some("Team {{ company }}".to_owned()),
        from_email: Some("team@example.com".to_owned()),
        cc: Some("cc@example.com".to_owned()),
        bcc: Some("bcc@example.com".to_owned()),
        rcpt_name: Some("{{ first_name }}".to_owned()),
        reply_to: Some("reply@example.com".to_owned()),
        preferred_mail_server: Some(MailServerId::from_uuid(Uuid::nil())),
        click_tracking: Some(true),
        open_tracking: Some(false),
        created_at: at,
        updated_at: at,
    }
}

fn account() -> AccountDefaults {
    AccountDefaults {
        click_tracking: false,
        open_tracking: true,
    }
}

fn server() -> ServerDefaults {
    ServerDefaults {
        default_from_email: "noreply@server.example".to_owned(),
        default_from_name: "Server Name".to_owned(),
    }
}

fn recipient() -> Recipient {
    Recipient {
        email: "ada@example.com".to_owned(),
        attributes: object(json!({ "first_name": "Ada", "company": "Acme" })),
    }
}

fn object(value: Json) -> Map<String, Json> {
    match value {
        Json::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

fn render(template: &Template) -> Result<RenderedMessage, RenderError> {
    render_with(template, &SendData::new(), &MessageLinks::default())
}

fn render_with(
    template: &Template,
    data: &SendData,
    links: &MessageLinks,
) -> Result<RenderedMessage, RenderError> {
    render_message(template, &account(), &server(), &recipient(), data, links)
}

/// Renders `subject` as the template's subject with the given data.
fn subject_with(subject: &str, data: Json) -> String {
    let mut t = template();
    subject.clone_into(&mut t.subject);
    render_with(&t, &object(data), &MessageLinks::default())
        .expect("renders")
        .subject
}

// ---- check_syntax ----------------------------------------------------------------

#[test]
fn check_syntax_accepts_variables_and_blocks() {
    let source =
        "Hi {{ name }}{% if vip %}, VIP{% endif %}\n{% for i in items %}{{ i }}{% endfor %}";
    assert_eq!(check_syntax("content", source), Ok(()));
}

#[test]
fn check_syntax_reports_field_line_and_message() {
    let error = check_syntax("content", "one\ntwo\nthree {{ name").expect_err("unterminated");
    assert_eq!(error.field, "content");
    assert_eq!(error.line, Some(3));
    assert_eq!(
        error.to_string(),
        "content: line 3: syntax error: unexpected end of input, expected end of variable block"
    );
}

#[test]
fn check_syntax_reports_unclosed_block() {
    let error = check_syntax("subject", "{% if x %}open").expect_err("unclosed if");
    assert_eq!(error.field, "subject");
    assert!(
        error.message.starts_with("syntax error:"),
        "{}",
        error.message
    );
}

#[test]
fn syntax_error_display_without_line() {
    let error = TemplateSyntaxError {
        field: "cc",
        line: None,
        message: "syntax error: oops".to_owned(),
    };
    assert_eq!(error.to_string(), "cc: syntax error: oops");
}

#[test]
fn stored_template_that_does_not_parse_is_a_syntax_render_error() {
    let mut t = template();
    t.cc = Some("{{ broken".to_owned());
    let error = render(&t).expect_err("does not parse");
    assert_eq!(error.field(), "cc");
    assert!(matches!(error, RenderError::Syntax(_)), "{error:?}");
}

// ---- variables -------------------------------------------------------------------

#[test]
fn attributes_are_variables() {
    let message = render(&template()).expect("renders");
    assert_eq!(message.subject, "Hello Ada");
    assert_eq!(message.html, "<p>Hi Ada</p>");
}

#[test]
fn custom_slugs_are_used_as_they_are() {
    let mut t = template();
    t.subject = "{{ plan_tier }}/{{ message_count }}".to_owned();
    let mut r = recipient();
    r.attributes.insert("plan_tier".to_owned(), json!("gold"));
    r.attributes.insert("message_count".to_owned(), json!(3));
    let message = render_message(
        &t,
        &account(),
        &server(),
        &r,
        &SendData::new(),
        &MessageLinks::default(),
    )
    .expect("renders");
    assert_eq!(message.subject, "gold/3");
}

#[test]
fn email_is_a_variable() {
    assert_eq!(
        subject_with("To {{ email }}", json!({})),
        "To ada@example.com"
    );
}

#[test]
fn data_is_a_variable() {
    assert_eq!(
        subject_with("Order {{ order.id }}", json!({ "order": { "id": 42 } })),
        "Order 42"
    );
}

#[test]
fn data_wins_over_attributes() {
    assert_eq!(
        subject_with("Hello {{ first_name }}", json!({ "first_name": "Grace" })),
        "Hello Grace"
    );
}

#[test]
fn data_wins_over_email() {
    assert_eq!(
        subject_with("{{ email }}", json!({ "email": "other@example.com" })),
        "other@example.com"
    );
}

#[test]
fn links_are_variables() {
    let mut t = template();
    t.subject = "{{ unsubscribe_url }}|{{ preferences_url }}".to_owned();
    let links = MessageLinks {
        unsubscribe_url: Some("https://m.example/u/abc".to_owned()),
        preferences_url: Some("https://m.example/p/abc".to_owned()),
    };
    let message = render_with(&t, &SendData::new(), &links).expect("renders");
    assert_eq!(
        message.subject,
        "https://m.example/u/abc|https://m.example/p/abc"
    );
}

#[test]
fn missing_links_are_defined_and_empty() {
    assert_eq!(
        subject_with(
            "[{{ unsubscribe_url }}][{{ preferences_url }}]{% if unsubscribe_url is defined %}!{% endif %}",
            json!({})
        ),
        "[][]!"
    );
}

#[test]
fn links_win_over_data() {
    let mut t = template();
    t.subject = "{{ unsubscribe_url }}".to_owned();
    let links = MessageLinks {
        unsubscribe_url: Some("https://m.example/u/real".to_owned()),
        preferences_url: None,
    };
    let data = object(json!({ "unsubscribe_url": "https://evil.example" }));
    let message = render_with(&t, &data, &links).expect("renders");
    assert_eq!(message.subject, "https://m.example/u/real");
}

#[test]
fn unknown_variables_render_empty() {
    assert_eq!(
        subject_with(
            "a{{ nope }}b{{ nope.deeper.still }}c{% for x in nope %}x{% endfor %}{% if nope %}y{% endif %}",
            json!({})
        ),
        "abc"
    );
}

// ---- escaping --------------------------------------------------------------------

#[test]
fn html_body_escapes_variables() {
    let mut t = template();
    t.content = "<p>{{ note }}</p>".to_owned();
    let data = object(json!({ "note": "<b>x</b> & y" }));
    let message = render_with(&t, &data, &MessageLinks::default()).expect("renders");
    assert_eq!(message.html, "<p>&lt;b&gt;x&lt;&#x2f;b&gt; &amp; y</p>");
}

#[test]
fn plain_fields_do_not_escape() {
    let mut t = template();
    let raw = "{{ note }}";
    for field in [
        &mut t.text_content,
        &mut t.from_name,
        &mut t.rcpt_name,
        &mut t.cc,
        &mut t.bcc,
        &mut t.reply_to,
    ] {
        *field = Some(raw.to_owned());
    }
    t.subject = raw.to_owned();
    let note = "<b>\"Tom\" & 'Jerry'</b>";
    let data = object(json!({ "note": note }));
    let message = render_with(&t, &data, &MessageLinks::default()).expect("renders");
    assert_eq!(message.subject, note);
    assert_eq!(message.text.as_deref(), Some(note));
    assert_eq!(message.from.name.as_deref(), Some(note));
    assert_eq!(message.to.name.as_deref(), Some(note));
    assert_eq!(message.cc.as_deref(), Some(note));
    assert_eq!(message.bcc.as_deref(), Some(note));
    assert_eq!(message.reply_to.as_deref(), Some(note));
}

// ---- sender pairing --------------------------------------------------------------

#[test]
fn own_from_email_uses_own_rendered_from_name() {
    let message = render(&template()).expect("renders");
    assert_eq!(
        message.from,
        Mailbox {
            name: Some("Team Acme".to_owned()),
            email: "team@example.com".to_owned(),
        }
    );
}

#[test]
fn own_from_email_without_from_name_never_borrows_server_name() {
    let mut t = template();
    t.from_name = None;
    let message = render(&t).expect("renders");
    assert_eq!(
        message.from,
        Mailbox {
            name: None,
            email: "team@example.com".to_owned(),
        }
    );
}

#[test]
fn own_from_name_rendering_blank_is_none() {
    let mut t = template();
    t.from_name = Some("{{ nope }}  ".to_owned());
    assert_eq!(render(&t).expect("renders").from.name, None);
}

#[test]
fn no_from_email_takes_server_pair_and_ignores_template_name() {
    let mut t = template();
    t.from_email = None;
    t.from_name = Some("Template Name".to_owned());
    let message = render(&t).expect("renders");
    assert_eq!(
        message.from,
        Mailbox {
            name: Some("Server Name".to_owned()),
            email: "noreply@server.example".to_owned(),
        }
    );
}

#[test]
fn empty_server_default_name_is_none() {
    let mut t = template();
    t.from_email = None;
    let message = render_message(
        &t,
        &account(),
        &ServerDefaults {
            default_from_email: "noreply@server.example".to_owned(),
            default_from_name: String::new(),
        },
        &recipient(),
        &SendData::new(),
        &MessageLinks::default(),
    )
    .expect("renders");
    assert_eq!(message.from.name, None);
    assert_eq!(message.from.email, "noreply@server.example");
}

// ---- recipient -------------------------------------------------------------------

#[test]
fn to_is_recipient_with_rendered_rcpt_name() {
    let message = render(&template()).expect("renders");
    assert_eq!(
        message.to,
        Mailbox {
            name: Some("Ada".to_owned()),
            email: "ada@example.com".to_owned(),
        }
    );
}

#[test]
fn to_name_is_none_when_unset_or_blank() {
    let mut t = template();
    t.rcpt_name = None;
    assert_eq!(render(&t).expect("renders").to.name, None);
    t.rcpt_name = Some(" {{ missing }} ".to_owned());
    assert_eq!(render(&t).expect("renders").to.name, None);
}

// ---- cc, bcc, reply-to -----------------------------------------------------------

#[test]
fn copy_and_reply_fields_render_per_send() {
    let mut t = template();
    t.cc = Some("{{ manager }}".to_owned());
    t.bcc = Some("audit+{{ first_name | lower }}@example.com".to_owned());
    t.reply_to = Some("{{ owner }}".to_owned());
    let data = object(json!({ "manager": "boss@example.com", "owner": "own@example.com" }));
    let message = render_with(&t, &data, &MessageLinks::default()).expect("renders");
    assert_eq!(message.cc.as_deref(), Some("boss@example.com"));
    assert_eq!(message.bcc.as_deref(), Some("audit+ada@example.com"));
    assert_eq!(message.reply_to.as_deref(), Some("own@example.com"));
}

#[test]
fn copy_and_reply_fields_blank_or_unset_are_none() {
    let mut t = template();
    t.cc = Some("{{ missing }}".to_owned());
    t.bcc = Some("  \r\n ".to_owned());
    t.reply_to = None;
    let message = render(&t).expect("renders");
    assert_eq!(message.cc, None);
    assert_eq!(message.bcc, None);
    assert_eq!(message.reply_to, None);
}

// ---- tracking --------------------------------------------------------------------

#[test]
fn tracking_uses_template_values_when_set() {
    let mut t = template();
    t.click_tracking = Some(true);
    t.open_tracking = Some(false);
    let message = render(&t).expect("renders");
    assert!(message.click_tracking);
    assert!(!message.open_tracking);
}

#[test]
fn tracking_falls_back_to_account_defaults_separately() {
    let mut t = template();
    t.click_tracking = None;
    t.open_tracking = Some(false);
    let message = render(&t).expect("renders");
    assert!(!message.click_tracking, "account default false");
    assert!(!message.open_tracking, "template value false");

    t.click_tracking = Some(true);
    t.open_tracking = None;
    let message = render(&t).expect("renders");
    assert!(message.click_tracking, "template value true");
    assert!(message.open_tracking, "account default true");
}

// ---- header injection ------------------------------------------------------------

#[test]
fn subject_collapses_newlines_and_trims() {
    assert_eq!(
        subject_with(
            "  Hi {{ x }}\n",
            json!({ "x": "a\r\nBcc: evil@example.com\n\nb" })
        ),
        "Hi a Bcc: evil@example.com b"
    );
}

#[test]
fn header_fields_collapse_newlines() {
    let mut t = template();
    let injected = "x\r\nBcc: evil@example.com";
    let data = object(json!({ "v": injected }));
    for field in [
        &mut t.from_name,
        &mut t.rcpt_name,
        &mut t.cc,
        &mut t.bcc,
        &mut t.reply_to,
    ] {
        *field = Some("{{ v }}\n".to_owned());
    }
    let message = render_with(&t, &data, &MessageLinks::default()).expect("renders");
    let flat = Some("x Bcc: evil@example.com");
    assert_eq!(message.from.name.as_deref(), flat);
    assert_eq!(message.to.name.as_deref(), flat);
    assert_eq!(message.cc.as_deref(), flat);
    assert_eq!(message.bcc.as_deref(), flat);
    assert_eq!(message.reply_to.as_deref(), flat);
}

#[test]
fn server_default_name_collapses_newlines() {
    let mut t = template();
    t.from_email = None;
    let message = render_message(
        &t,
        &account(),
        &ServerDefaults {
            default_from_email: "noreply@server.example".to_owned(),
            default_from_name: "Ops\r\nX-Evil: 1".to_owned(),
        },
        &recipient(),
        &SendData::new(),
        &MessageLinks::default(),
    )
    .expect("renders");
    assert_eq!(message.from.name.as_deref(), Some("Ops X-Evil: 1"));
}

#[test]
fn bodies_keep_newlines() {
    let mut t = template();
    t.content = "<p>a</p>\n<p>{{ first_name }}</p>\n".to_owned();
    t.text_content = Some("line 1\r\nline 2 {{ first_name }}\n".to_owned());
    let message = render(&t).expect("renders");
    assert_eq!(message.html, "<p>a</p>\n<p>Ada</p>\n");
    assert_eq!(message.text.as_deref(), Some("line 1\r\nline 2 Ada\n"));
}

// ---- text body -------------------------------------------------------------------

#[test]
fn text_body_is_none_when_unset_or_blank() {
    let mut t = template();
    t.text_content = None;
    assert_eq!(render(&t).expect("renders").text, None);
    t.text_content = Some("{{ missing }}\n".to_owned());
    assert_eq!(render(&t).expect("renders").text, None);
}

// ---- limits ----------------------------------------------------------------------

#[test]
fn endless_loops_run_out_of_fuel() {
    let mut t = template();
    t.content = "{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}x{% endfor %}{% endfor %}{% endfor %}".to_owned();
    let error = render(&t).expect_err("too much work");
    assert_eq!(error, RenderError::OutOfFuel { field: "content" });
    assert_eq!(
        error.to_string(),
        "content: rendering stopped after 50000 steps"
    );
}

#[test]
fn fuel_is_per_field_and_ample_for_normal_loops() {
    let mut t = template();
    t.content = "{% for i in items %}<li>{{ i }}</li>{% endfor %}".to_owned();
    t.text_content = Some("{% for i in items %}{{ i }}\n{% endfor %}".to_owned());
    let items: Vec<u32> = (0..1_000).collect();
    let data = object(json!({ "items": items }));
    let message = render_with(&t, &data, &MessageLinks::default()).expect("renders");
    assert!(message.html.ends_with("<li>999</li>"));
}

#[test]
fn huge_output_is_too_large() {
    let mut t = template();
    t.text_content = Some("{% for i in range(20) %}{{ 'x' * 1000000 }}{% endfor %}".to_owned());
    let error = render(&t).expect_err("too large");
    assert_eq!(
        error,
        RenderError::TooLarge {
            field: "textContent",
            header: false
        }
    );
    assert_eq!(error.field(), "textContent");
    assert!(error.to_string().contains("too large"), "{error}");
}

#[test]
fn the_message_is_bounded_to_2_mib_across_its_fields_and_each_header_to_4_kib() {
    // 1.5 MiB of HTML and 1.5 MiB of text: each fits alone, not both.
    let mut t = template();
    t.content = "{{ 'h' * 1572864 }}".to_owned();
    t.text_content = Some("{{ 't' * 1572864 }}".to_owned());
    let error = render(&t).expect_err("3 MiB in all");
    assert_eq!(
        error,
        RenderError::TooLarge {
            field: "textContent",
            header: false
        }
    );
    assert_eq!(
        error.to_string(),
        "textContent: the rendered output is too large (more than 2 MiB in the message's \
         fields together)"
    );
    t.text_content = Some("{{ 't' * 500000 }}".to_owned());
    let message = render(&t).expect("2 MiB in all");
    assert_eq!(
        message.html.len() + message.text.map_or(0, |t| t.len()),
        2_072_864
    );

    // A header field has 4 KiB of its own.
    let mut t = template();
    t.cc = Some("{{ 'c' * 4097 }}".to_owned());
    let error = render(&t).expect_err("a 4097-byte cc");
    assert_eq!(
        error,
        RenderError::TooLarge {
            field: "cc",
            header: true
        }
    );
    assert!(error.to_string().contains("4096 bytes"), "{error}");
    t.cc = Some("{{ 'c' * 4096 }}".to_owned());
    assert_eq!(render(&t).expect("4 KiB").cc.map(|cc| cc.len()), Some(4096));
}

#[test]
fn evaluation_failure_names_field_and_line() {
    let mut t = template();
    t.subject = "ok\n{{ first_name | no_such_filter }}".to_owned();
    let error = render(&t).expect_err("unknown filter");
    assert_eq!(error.field(), "subject");
    match &error {
        RenderError::Failed { line, message, .. } => {
            assert_eq!(*line, Some(2));
            assert!(message.contains("no_such_filter"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(
        error.to_string().starts_with("subject: line 2: "),
        "{error}"
    );
}

// ---- helpers ---------------------------------------------------------------------

#[test]
fn single_line_collapses_each_run_once() {
    assert_eq!(single_line("\r\n a\r\n\r\nb\rc\nd \n"), "a b c d");
}
