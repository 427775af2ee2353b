//! Calls against the real server: the sending path end to end, paged streams, the typed
//! problem, and a tour of the other resources that reads every kind of answer.

use mailroom_client::{
    AnnouncementAudience, AutomationSettings, Condition, ContactFilter, ContactSearch,
    ContactUpsert, Error, FormUpdate, MailServerSettings, MemberRole, MessageFilter,
    NewAnnouncement, NewEvent, NewForm, NewMember, NewSegment, NewTemplate, NewToken, NewTopic,
    PageRequest, Patch, SegmentUpdate, SendMessage, TemplateUpdate, TokenScope, TopicUpdate,
    TryStreamExt, UnsubscribeForm, WebhookEventFilter,
};
use mailroom_server::message_worker::MessageWorker;
use mailroom_test_support::{TestSmtpOptions, TestSmtpServer, TlsMode};

use crate::support::{object, Setup};

fn loopback_server(smtp: &TestSmtpServer) -> MailServerSettings {
    MailServerSettings {
        service_type: "smtp".into(),
        host: "127.0.0.1".into(),
        port: smtp.port(),
        secure: false,
        require_tls: false,
        allow_insecure_tls: None,
        user: String::new(),
        password: "".into(),
        default_from_email: "hello@acme.example".into(),
        default_from_name: "Acme".into(),
    }
}

fn receipt_template() -> NewTemplate {
    NewTemplate {
        name: "Receipt".into(),
        slug: "order-receipt".into(),
        subject: "Your receipt".into(),
        content: "<p>Total: {{ total }}</p>".into(),
        ..NewTemplate::default()
    }
}

#[tokio::test]
async fn an_event_and_a_send_reach_the_smtp_server_and_read_back() {
    let setup = Setup::new(|_| {}).await;
    let client = &setup.client;
    let account = setup.account().await;
    let fetched = client.get_account(account).await.expect("account");
    assert_eq!(fetched.name, "Acme");
    assert!(fetched.webhooks.is_none());

    let smtp = TestSmtpServer::start(TestSmtpOptions {
        tls: TlsMode::None,
        ..TestSmtpOptions::default()
    });
    let server = client
        .create_mail_server(account, &loopback_server(&smtp))
        .await
        .expect("mail server");
    assert_eq!(server.port, smtp.port());
    assert_eq!(server.health.status, "healthy");
    // Saving the same settings again keeps the server; reads agree.
    let server = client
        .update_mail_server(account, server.id, &loopback_server(&smtp))
        .await
        .expect("mail server saved");
    assert_eq!(
        client
            .get_mail_server(account, server.id)
            .await
            .expect("read")
            .default_from_email,
        "hello@acme.example"
    );
    assert_eq!(client.count_mail_servers(account).await.expect("count"), 1);
    let servers: Vec<_> = client
        .stream_mail_servers(account)
        .try_collect()
        .await
        .expect("servers");
    assert_eq!(servers.len(), 1);
    assert_eq!(
        client
            .list_mail_servers(account, PageRequest::default())
            .await
            .expect("page")
            .items[0]
            .id,
        server.id
    );
    let template = client
        .create_template(account, &receipt_template())
        .await
        .expect("template");
    assert_eq!(template.slug, "order-receipt");

    // An event creates the contact.
    let event = client
        .record_event(
            account,
            &NewEvent::new("signedUp", "grace@example.com").attribute("plan", "pro"),
        )
        .await
        .expect("event");
    assert_eq!(event.slug, "signed_up");
    assert_eq!(event.account_id, account);
    let found = client
        .list_contacts(
            account,
            &ContactFilter::email("GRACE@example.com"),
            PageRequest::default(),
        )
        .await
        .expect("lookup by email");
    assert_eq!(found.items.len(), 1);
    let contact = &found.items[0];
    assert_eq!(contact.id, event.contact_id);
    // Lists leave attributes out; a single read has them.
    let read = client
        .get_contact(account, contact.id)
        .await
        .expect("contact");
    assert_eq!(read.attributes.as_ref().expect("attributes")["plan"], "pro");

    // A send with a key, sent twice, is one message.
    let send = SendMessage::new("order-receipt", "grace@example.com").data("total", "9.99");
    let queued = client
        .send_message(account, &send, Some("order-1042"))
        .await
        .expect("send");
    assert_eq!(queued.status, "queued");
    assert_eq!(queued.contact_id, contact.id);
    assert_eq!(queued.template_id, template.id);
    let again = client
        .send_message(account, &send, Some("order-1042"))
        .await
        .expect("repeated send");
    assert_eq!(
        again.id, queued.id,
        "the same key answers the first message"
    );
    // Without a key each call gets a fresh one: a second message.
    let other = client
        .send_message(account, &send, None)
        .await
        .expect("unkeyed send");
    assert_ne!(other.id, queued.id);

    for _ in 0..10 {
        let round = MessageWorker::new(setup.app.services.clone(), &setup.app.config)
            .run_once()
            .await
            .expect("worker round");
        if round.claimed == 0 {
            break;
        }
    }
    let sent = client
        .get_message(account, queued.id)
        .await
        .expect("read back");
    assert_eq!(sent.status, "sent", "{sent:?}");
    assert!(sent.sent_at.is_some());
    assert_eq!(sent.data["total"], "9.99");
    assert_eq!(smtp.message_count(), 2);
    let messages = smtp.messages();
    assert!(
        messages[0].data.contains("Total: 9.99"),
        "{}",
        messages[0].data
    );
    assert_eq!(messages[0].recipients, ["grace@example.com"]);

    let sent_filter = MessageFilter {
        status: Some("sent".into()),
        contact_id: Some(contact.id),
        ..MessageFilter::default()
    };
    assert_eq!(
        client
            .count_messages(account, &sent_filter)
            .await
            .expect("count"),
        2
    );
    let listed: Vec<_> = client
        .stream_messages(account, sent_filter)
        .try_collect()
        .await
        .expect("stream");
    assert_eq!(listed.len(), 2);
    // The log by address (any case) and template, newest first: the unkeyed send leads.
    let newest = client
        .list_messages(
            account,
            &MessageFilter {
                email: Some("GRACE@Example.com".into()),
                template_id: Some(template.id),
                newest_first: true,
                ..MessageFilter::default()
            },
            PageRequest::default(),
        )
        .await
        .expect("newest first");
    let ids: Vec<_> = newest.items.iter().map(|message| message.id).collect();
    assert_eq!(ids, [other.id, queued.id]);
    let stats = client.message_stats(account).await.expect("stats");
    assert_eq!(stats.last().expect("today").sent, 2);

    // A send a day ahead waits until then; one is cancelled by its key, one by its id.
    let tomorrow = mailroom_domain::Timestamp::parse("2099-01-01T00:00:00Z").expect("time");
    let too_far = client
        .send_message(
            account,
            &SendMessage::new("order-receipt", "grace@example.com").send_at(tomorrow),
            Some("order-far"),
        )
        .await
        .expect_err("2099 is more than 30 days ahead");
    assert!(
        too_far
            .problem()
            .and_then(|problem| problem.field("sendAt"))
            .is_some_and(|message| message.contains("30 days")),
        "{too_far:?}"
    );
    let later = mailroom_domain::Timestamp::from_datetime(
        time::OffsetDateTime::now_utc() + time::Duration::days(1),
    );
    let scheduled = SendMessage::new("order-receipt", "grace@example.com").send_at(later);
    let by_key = client
        .send_message(account, &scheduled, Some("order-later"))
        .await
        .expect("scheduled");
    assert_eq!(by_key.status, "queued");
    let cancelled = client
        .cancel_message_by_key(account, "order-later")
        .await
        .expect("cancel by key");
    assert_eq!(
        (
            cancelled.id,
            cancelled.status.as_str(),
            cancelled.skip_reason.as_deref()
        ),
        (by_key.id, "skipped", Some("cancelled"))
    );
    let by_id = client
        .send_message(account, &scheduled, None)
        .await
        .expect("scheduled");
    let cancelled = client
        .cancel_message(account, by_id.id)
        .await
        .expect("cancel by id");
    assert_eq!(cancelled.skip_reason.as_deref(), Some("cancelled"));
    let again = client
        .cancel_message(account, by_id.id)
        .await
        .expect_err("skipped already");
    assert_eq!(again.status(), Some(400), "{again:?}");
    // A report that is neither a DSN nor an ARF complaint is refused as a problem.
    let error = client
        .record_feedback(account, "Subject: hello\r\n\r\nnot a report\r\n")
        .await
        .expect_err("not a report");
    assert_eq!(error.status(), Some(400), "{error:?}");
    client
        .delete_mail_server(account, server.id)
        .await
        .expect("mail server deleted");
    assert_eq!(client.count_mail_servers(account).await.expect("count"), 0);
}

#[tokio::test]
async fn a_stream_walks_every_page_in_order() {
    let setup = Setup::new(|_| {}).await;
    let account = setup.account().await;
    let emails: Vec<String> = (0..7).map(|n| format!("reader{n}@example.com")).collect();
    for email in &emails {
        setup
            .client
            .upsert_contact(
                account,
                &ContactUpsert {
                    email: email.clone(),
                    attributes: None,
                },
            )
            .await
            .expect("contact");
    }
    let by_creation = ContactFilter {
        sort_by: Some("createDate".into()),
        ..ContactFilter::default()
    };
    // Three pages of 3, 3 and 1.
    let client = setup.client.with_page_size(3);
    let streamed: Vec<String> = client
        .stream_contacts(account, by_creation.clone())
        .map_ok(|contact| contact.email)
        .try_collect()
        .await
        .expect("stream");
    assert_eq!(streamed, emails);
    assert_eq!(
        client
            .count_contacts(account, &by_creation)
            .await
            .expect("count"),
        7
    );
    // A page the size of the list ends the walk too (with one empty page after it).
    let exact: Vec<_> = setup
        .client
        .with_page_size(7)
        .stream_contacts(account, by_creation)
        .try_collect()
        .await
        .expect("stream");
    assert_eq!(exact.len(), 7);
    // The searches page the same way.
    let everyone: Vec<_> = client
        .stream_search(account, ContactSearch::default())
        .try_collect()
        .await
        .expect("search stream");
    assert_eq!(everyone.len(), 7);
    assert_eq!(
        client
            .count_search(account, &ContactSearch::default())
            .await
            .expect("count"),
        7
    );
}

#[tokio::test]
async fn a_refused_body_is_a_typed_problem_naming_the_fields() {
    let setup = Setup::new(|_| {}).await;
    let account = setup.account().await;
    let bad = NewTemplate {
        name: "Receipt".into(),
        slug: "Not A Slug".into(),
        subject: String::new(),
        content: "<p>hi</p>".into(),
        ..NewTemplate::default()
    };
    let error = setup
        .client
        .create_template(account, &bad)
        .await
        .expect_err("refused");
    let Error::Api(problem) = &error else {
        panic!("not a problem: {error:?}");
    };
    assert_eq!(problem.status, 400);
    assert_eq!(problem.title, "Bad Request");
    assert!(!problem.detail.is_empty());
    assert!(problem.field("slug").is_some(), "{problem:?}");
    assert!(problem.field("subject").is_some(), "{problem:?}");
    assert_eq!(error.status(), Some(400));

    // A token that is not one is a 401 problem; an unknown record a 404.
    let stranger =
        mailroom_client::Client::new(&setup.app.address, "mailroom_pat_nope").expect("client");
    let error = stranger.list_accounts().await.expect_err("refused");
    assert_eq!(error.status(), Some(401), "{error:?}");
    let unknown = "0193b1c4-0000-7000-8000-000000000001".parse().expect("id");
    let error = setup
        .client
        .get_template(account, unknown)
        .await
        .expect_err("unknown");
    assert_eq!(error.status(), Some(404), "{error:?}");

    // An answer beyond the client's bound is refused, not buffered: the OpenAPI document
    // is about 100 KiB.
    let small = mailroom_client::Client::builder(&setup.app.address)
        .max_response_bytes(10_000)
        .build()
        .expect("client");
    let error = small.openapi_json().await.expect_err("too large");
    assert!(
        matches!(
            error,
            Error::ResponseTooLarge {
                operation: "openapi_json",
                limit: 10_000
            }
        ),
        "{error:?}"
    );
    // A key that cannot be a header is refused before anything is sent.
    let send = SendMessage {
        slug: "order-receipt".into(),
        email: "grace@example.com".into(),
        data: None,
        send_at: None,
    };
    let error = setup
        .client
        .send_message(account, &send, Some("line\nbreak"))
        .await
        .expect_err("bad key");
    assert!(matches!(error, Error::InvalidRequest(_)), "{error:?}");
}

/// The other resources once each, so every answer type is read from the real server.
#[tokio::test]
async fn a_tour_of_the_other_operations_reads_every_answer() {
    let setup = Setup::new(|_| {}).await;
    let client = &setup.client;
    let account = setup.account().await;

    // Accounts, members, tokens.
    let renamed = client
        .update_account(
            account,
            &mailroom_client::AccountUpdate {
                name: Some("Acme Ltd".into()),
                ..Default::default()
            },
        )
        .await
        .expect("rename");
    assert_eq!(renamed.name, "Acme Ltd");
    assert_eq!(renamed.branding, mailroom_client::Branding::default());
    let branded = client
        .update_account(
            account,
            &mailroom_client::AccountUpdate {
                branding: Some(mailroom_client::BrandingUpdate {
                    display_name: Some(Some("Acme Rockets".into())),
                    accent_color: Some(Some("#FFD700".into())),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
        .await
        .expect("branding");
    assert_eq!(
        branded.branding.display_name.as_deref(),
        Some("Acme Rockets")
    );
    assert_eq!(branded.branding.accent_color.as_deref(), Some("#ffd700"));
    assert_eq!(
        branded.branding.accent_text_color.as_deref(),
        Some("#000000")
    );
    let cleared = client
        .update_account(
            account,
            &mailroom_client::AccountUpdate {
                branding: Some(mailroom_client::BrandingUpdate {
                    display_name: Some(None),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
        .await
        .expect("clear the display name");
    assert_eq!(cleared.branding.display_name, None);
    assert_eq!(cleared.branding.accent_color.as_deref(), Some("#ffd700"));
    assert_eq!(
        client.list_accounts().await.expect("accounts").items.len(),
        1
    );
    let member = client
        .add_member(
            account,
            &NewMember {
                email: "grace@example.com".into(),
                role: MemberRole::Member,
            },
        )
        .await
        .expect("member");
    let promoted = client
        .change_member_role(account, member.id, MemberRole::Admin)
        .await
        .expect("role");
    assert_eq!(promoted.role, "admin");
    assert_eq!(
        client
            .list_members(account)
            .await
            .expect("members")
            .items
            .len(),
        2
    );
    client
        .remove_member(account, member.id)
        .await
        .expect("removed");
    let token = client
        .create_token(&NewToken {
            name: "backend".into(),
            scope: Some(TokenScope::Sending),
            account_ids: Some(vec![account]),
            ..NewToken::default()
        })
        .await
        .expect("token");
    assert_eq!(token.scope, "sending");
    assert!(token.token.is_some());
    assert_eq!(token.account_ids, Some(vec![account]));
    assert_eq!(client.list_tokens().await.expect("tokens").items.len(), 2);
    // The sending token may send but not manage: a 403 problem.
    let secret = token.token.as_ref().expect("the secret, this once");
    assert!(
        !format!("{token:?}").contains(secret.expose()),
        "redacted in Debug"
    );
    let backend =
        mailroom_client::Client::new(&setup.app.address, secret.expose()).expect("client");
    let error = backend
        .list_templates(account, PageRequest::default())
        .await
        .expect_err("outside the scope");
    assert_eq!(error.status(), Some(403), "{error:?}");
    client.revoke_token(token.id).await.expect("revoked");

    // Templates (a new account has starter templates), topics, automations, announcements.
    let starters = client.count_templates(account).await.expect("count");
    let template = client
        .create_template(account, &receipt_template())
        .await
        .expect("template");
    let changed = client
        .update_template(
            account,
            template.id,
            &TemplateUpdate {
                subject: Patch::Set("Thanks".into()),
                reply_to: Patch::Set("help@acme.example".into()),
                ..TemplateUpdate::default()
            },
        )
        .await
        .expect("update");
    assert_eq!(changed.subject, "Thanks");
    let cleared = client
        .update_template(
            account,
            template.id,
            &TemplateUpdate {
                reply_to: Patch::Clear,
                ..TemplateUpdate::default()
            },
        )
        .await
        .expect("clear");
    assert_eq!(cleared.reply_to, None);
    assert_eq!(cleared.subject, "Thanks", "a kept field stays");
    assert_eq!(
        client.count_templates(account).await.expect("count"),
        starters + 1
    );
    let streamed: Vec<_> = client
        .with_page_size(2)
        .stream_templates(account)
        .try_collect()
        .await
        .expect("templates");
    assert_eq!(streamed.len() as u64, starters + 1);
    assert_eq!(
        client
            .get_template(account, template.id)
            .await
            .expect("get")
            .id,
        template.id
    );

    let topics = client.count_topics(account).await.expect("count");
    let topic = client
        .create_topic(
            account,
            &NewTopic {
                name: "News".into(),
                description: Some("Monthly".into()),
            },
        )
        .await
        .expect("topic");
    let topic = client
        .update_topic(
            account,
            topic.id,
            &TopicUpdate {
                description: Patch::Clear,
                ..TopicUpdate::default()
            },
        )
        .await
        .expect("topic update");
    assert_eq!(topic.description, None);
    assert_eq!(
        client.get_topic(account, topic.id).await.expect("get").name,
        "News"
    );
    assert_eq!(
        client.count_topics(account).await.expect("count"),
        topics + 1
    );
    let listed = client
        .list_topics(account, PageRequest::new(topics, 10))
        .await
        .expect("topics");
    assert_eq!((listed.start, listed.items.len()), (topics, 1));
    assert_eq!(listed.items[0].id, topic.id);

    let form = client
        .create_form(
            account,
            &NewForm {
                name: "Sign-up".into(),
                topic_ids: vec![topic.id],
                attributes: vec!["first_name".into()],
                ..NewForm::default()
            },
        )
        .await
        .expect("form");
    let form = client
        .update_form(
            account,
            form.id,
            &FormUpdate {
                success_redirect_url: Patch::Set("https://example.com/thanks".into()),
                ..FormUpdate::default()
            },
        )
        .await
        .expect("form update");
    assert_eq!(
        form.success_redirect_url.as_deref(),
        Some("https://example.com/thanks")
    );
    assert_eq!(client.get_form(account, form.id).await.expect("get"), form);
    assert_eq!(client.count_forms(account).await.expect("count"), 1);
    let listed = client
        .list_forms(account, PageRequest::new(0, 10))
        .await
        .expect("forms");
    assert_eq!(listed.items, vec![form.clone()]);
    assert!(client
        .form_page(&form.form_key)
        .await
        .expect("page")
        .contains("name=\"first_name\""));
    let mut fields = serde_json::Map::new();
    fields.insert("email".into(), "fay@example.com".into());
    fields.insert("first_name".into(), "Fay".into());
    let answer = client
        .submit_form(&form.form_key, &fields)
        .await
        .expect("posted");
    assert_eq!(answer.status, "subscribed");
    let error = client
        .confirmation_page(&form.form_key, "not-a-token")
        .await
        .expect_err("bad link");
    assert_eq!(error.status(), Some(404), "{error:?}");
    let error = client
        .confirm_subscription(&form.form_key, "not-a-token")
        .await
        .expect_err("bad link");
    assert_eq!(error.status(), Some(404), "{error:?}");
    assert_eq!(
        client
            .delete_form(account, form.id)
            .await
            .expect("form deleted")
            .id,
        form.id
    );

    let settings = AutomationSettings {
        name: "Welcome".into(),
        template_id: template.id,
        trigger_event_slug: "signed_up".into(),
        trigger_event_condition: "once".into(),
        timing_condition: "x_days_after".into(),
        timing_value: Some(2),
        is_enabled: false,
    };
    let automation = client
        .create_automation(account, &settings)
        .await
        .expect("automation");
    assert_eq!(automation.timing_value, Some(2));
    let enabled = AutomationSettings {
        is_enabled: true,
        ..settings
    };
    assert!(
        client
            .update_automation(account, automation.id, &enabled)
            .await
            .expect("update")
            .is_enabled
    );
    let listed: Vec<_> = client
        .stream_automations(account)
        .try_collect()
        .await
        .expect("automations");
    let ours = listed
        .iter()
        .find(|item| item.automation.id == automation.id)
        .expect("listed");
    assert_eq!(
        ours.template.as_ref().expect("template").slug,
        "order-receipt"
    );
    assert_eq!(
        client.count_automations(account).await.expect("count"),
        listed.len() as u64
    );
    client
        .get_automation(account, automation.id)
        .await
        .expect("get");
    client
        .delete_automation(account, automation.id)
        .await
        .expect("delete");

    // Contacts, events, attributes, import.
    let contact = client
        .upsert_contact(
            account,
            &ContactUpsert {
                email: "lin@example.com".into(),
                attributes: Some(object(serde_json::json!({"plan": "pro"}))),
            },
        )
        .await
        .expect("contact");
    client
        .record_event(
            account,
            &NewEvent {
                slug: "signed_up".into(),
                email: "lin@example.com".into(),
                attributes: None,
            },
        )
        .await
        .expect("event");
    let export = client
        .export_contact(account, contact.id)
        .await
        .expect("export");
    assert_eq!(export.contact.id, contact.id);
    assert_eq!(
        (export.events.len(), export.events[0].slug.as_str()),
        (1, "signed_up")
    );
    assert!(export.messages.is_empty() && export.suppressions.is_empty());
    let names = client.event_names(account).await.expect("names");
    assert_eq!(names.items[0].slug, "signed_up");
    assert_eq!(names.items[0].count, 1);
    let attributes: Vec<_> = client
        .stream_attributes(account)
        .try_collect()
        .await
        .expect("attributes");
    assert!(attributes
        .iter()
        .any(|a| a.slug == "plan" && a.kind == "string"));
    assert_eq!(
        client.count_attributes(account).await.expect("count") as usize,
        attributes.len()
    );
    let report = client
        .import_contacts(
            account,
            "email,plan\nmo@example.com,free\nnot-an-email,free\n",
        )
        .await
        .expect("import");
    assert_eq!((report.created, report.rejected), (1, 1), "{report:?}");
    assert_eq!(report.errors[0].line, 3);
    let pros = ContactSearch {
        attributes: vec![Condition {
            slug: "plan".into(),
            operator: "s_equal".into(),
            value: Some("pro".into()),
        }],
        ..ContactSearch::default()
    };
    let found = client
        .search_contacts(account, &pros, PageRequest::default())
        .await
        .expect("search");
    assert_eq!(found.items.len(), 1, "{found:?}");
    assert_eq!(found.items[0].id, contact.id);
    // Saved segments: the same audience under a name, counted live.
    let segment = client
        .create_segment(
            account,
            &NewSegment {
                name: "Pros".into(),
                audience: ContactSearch {
                    topic_id: Some(topic.id),
                    ..pros.clone()
                },
            },
        )
        .await
        .expect("segment");
    assert_eq!(segment.attributes, pros.attributes);
    assert_eq!(segment.topic_id, Some(topic.id));
    assert_eq!(
        client
            .count_segment_contacts(account, segment.id)
            .await
            .expect("count"),
        1
    );
    let renamed = client
        .update_segment(
            account,
            segment.id,
            &SegmentUpdate {
                name: Patch::Set("Paying".into()),
                ..SegmentUpdate::default()
            },
        )
        .await
        .expect("segment update");
    assert_eq!(
        (renamed.name.as_str(), renamed.topic_id),
        ("Paying", Some(topic.id))
    );
    assert_eq!(
        client.get_segment(account, segment.id).await.expect("get"),
        renamed
    );
    assert_eq!(client.count_segments(account).await.expect("count"), 1);
    let segments: Vec<_> = client
        .stream_segments(account)
        .try_collect()
        .await
        .expect("segments");
    assert_eq!(segments, std::slice::from_ref(&renamed));
    assert_eq!(
        client
            .list_segments(account, PageRequest::default())
            .await
            .expect("list")
            .items,
        segments
    );
    let from_segment = client
        .create_announcement(
            account,
            &NewAnnouncement {
                name: "From the segment".into(),
                template_id: template.id,
                audience: AnnouncementAudience::Segment {
                    segment_id: segment.id,
                },
                send_at: None,
            },
        )
        .await
        .expect("announcement from a segment");
    assert_eq!(from_segment.segment_id, Some(segment.id));
    assert_eq!(from_segment.topic_id, Some(topic.id));
    client
        .delete_segment(account, segment.id)
        .await
        .expect("delete");
    let announcement = client
        .create_announcement(
            account,
            &NewAnnouncement {
                name: "Launch".into(),
                template_id: template.id,
                audience: AnnouncementAudience::Given(ContactSearch {
                    topic_id: Some(topic.id),
                    ..pros.clone()
                }),
                send_at: None,
            },
        )
        .await
        .expect("announcement");
    assert_eq!(announcement.segment_id, None);
    assert_eq!(
        client
            .get_announcement(account, announcement.id)
            .await
            .expect("get")
            .name,
        "Launch"
    );
    assert_eq!(client.count_announcements(account).await.expect("count"), 2);
    let paused = client
        .pause_announcement(account, announcement.id)
        .await
        .expect("pause");
    assert_eq!(paused.status, "paused");
    let resumed = client
        .resume_announcement(account, announcement.id)
        .await
        .expect("resume");
    assert_eq!(resumed.status, "running");
    let cancelled = client
        .cancel_announcement(account, announcement.id)
        .await
        .expect("cancel");
    assert_eq!(cancelled.status, "cancelled");
    assert!(cancelled.process_date.is_some());
    assert_eq!(
        client
            .list_announcements(account, PageRequest::default())
            .await
            .expect("list")
            .items
            .len(),
        2
    );
    client.get_contact(account, contact.id).await.expect("get");
    let unbounced = client
        .unbounce_contact(account, contact.id)
        .await
        .expect("nothing to clear is fine");
    assert_eq!(unbounced.hard_bounced, None);
    client
        .delete_contact(account, contact.id)
        .await
        .expect("delete");
    let erased = client
        .erase_contact(account, export.contact.id)
        .await
        .expect_err("deleted already");
    assert_eq!(erased.status(), Some(404), "{erased:?}");
    let mo = client
        .list_contacts(
            account,
            &ContactFilter::email("mo@example.com"),
            PageRequest::default(),
        )
        .await
        .expect("the imported contact")
        .items
        .remove(0);
    let erased = client.erase_contact(account, mo.id).await.expect("erased");
    assert_eq!(erased.id, mo.id);
    let error = client.get_contact(account, mo.id).await.expect_err("gone");
    assert_eq!(error.status(), Some(404), "{error:?}");
    // The automation that used it is gone, so it may go.
    let deleted = client
        .delete_template(account, template.id)
        .await
        .expect("template deleted");
    assert_eq!(deleted.id, template.id);
    client
        .delete_topic(account, topic.id)
        .await
        .expect("topic deleted");

    // No webhooks are configured, so the deletion queued no webhook event.
    assert_eq!(
        client
            .count_webhook_events(account, &WebhookEventFilter::default())
            .await
            .expect("count"),
        0
    );

    // The suppression list: by hand, from CSV, read back, exported and removed.
    let listed = client
        .add_suppression(
            account,
            &mailroom_client::NewSuppression {
                email: "Blocked@Example.com".into(),
                detail: Some("asked by phone".into()),
            },
        )
        .await
        .expect("listed by hand");
    assert_eq!(
        (listed.reason.as_str(), listed.source.as_str()),
        ("manual", "api")
    );
    assert_eq!(listed.email.as_deref(), Some("Blocked@Example.com"));
    let imported = client
        .import_suppressions(
            account,
            "email,detail\nsecond@example.com,from the old system\nnot-an-address,\n",
        )
        .await
        .expect("imported");
    assert_eq!((imported.added, imported.rejected), (1, 1));
    assert_eq!(imported.errors[0].line, 3);
    let everything = mailroom_client::SuppressionFilter::default();
    assert_eq!(
        client
            .count_suppressions(account, &everything)
            .await
            .expect("count"),
        2
    );
    let page = client
        .list_suppressions(
            account,
            &mailroom_client::SuppressionFilter::email("blocked@example.com"),
            PageRequest::default(),
        )
        .await
        .expect("list");
    assert_eq!(page.items, vec![listed.clone()]);
    let export = client.export_suppressions(account).await.expect("export");
    assert!(export.starts_with("email,address_hash,"), "{export}");
    assert!(export.contains("second@example.com"), "{export}");
    let removed = client
        .remove_suppressions(
            account,
            &mailroom_client::SuppressionFilter::email("blocked@example.com"),
        )
        .await
        .expect("removed");
    assert_eq!(removed.removed, vec![listed]);

    // System and public routes.
    assert_eq!(client.healthz().await.expect("health").status, "ok");
    client.readyz().await.expect("ready");
    assert!(client.metrics().await.expect("metrics").contains("# TYPE"));
    let error = client
        .unsubscribe_page("not-a-token")
        .await
        .expect_err("bad link");
    assert!(matches!(error.status(), Some(400 | 404)), "{error:?}");
    let error = client
        .unsubscribe_post("not-a-token", &UnsubscribeForm::default())
        .await
        .expect_err("bad link");
    assert!(matches!(error.status(), Some(400 | 404)), "{error:?}");
    let pixel = client
        .open_pixel("not-a-token")
        .await
        .expect("a pixel whatever the token");
    assert!(pixel.starts_with(b"GIF"), "{pixel:?}");
    let error = client
        .follow_link("not-a-token")
        .await
        .expect_err("bad link");
    assert!(matches!(error.status(), Some(400 | 404)), "{error:?}");
}

const PUBLIC_URL: &str = "http://mailroom.test";

/// The tokens of every `{PUBLIC_URL}{route}…` link in `mail`, in order, after undoing
/// quoted-printable soft breaks and minijinja's `&#x2f;`.
fn link_tokens(mail: &str, route: &str) -> Vec<String> {
    let mail = mail
        .replace("=\r\n", "")
        .replace("=3D", "=")
        .replace("&#x2f;", "/");
    let prefix = format!("{PUBLIC_URL}{route}");
    mail.match_indices(&prefix)
        .map(|(at, _)| {
            mail[at + prefix.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .collect()
        })
        .collect()
}

/// The public operations with the signed tokens of a real email.
#[tokio::test]
async fn the_links_of_a_delivered_email_open_click_and_unsubscribe() {
    let setup = Setup::new(|config| config.public_url = PUBLIC_URL.to_owned()).await;
    let client = &setup.client;
    let account = setup.account().await;
    let smtp = TestSmtpServer::start(TestSmtpOptions {
        tls: TlsMode::None,
        ..TestSmtpOptions::default()
    });
    client
        .create_mail_server(account, &loopback_server(&smtp))
        .await
        .expect("mail server");
    client
        .create_template(
            account,
            &NewTemplate {
                name: "News".into(),
                slug: "news".into(),
                subject: "News".into(),
                content: "<html><body><a href=\"https://shop.example/orders/7\">Order</a> \
                    <a href=\"{{ unsubscribe_url }}\">Unsubscribe</a></body></html>"
                    .into(),
                open_tracking: Some(true),
                click_tracking: Some(true),
                ..NewTemplate::default()
            },
        )
        .await
        .expect("template");
    let message = client
        .send_message(
            account,
            &SendMessage::new("news", "grace@example.com"),
            None,
        )
        .await
        .expect("send");
    MessageWorker::new(setup.app.services.clone(), &setup.app.config)
        .run_once()
        .await
        .expect("worker round");
    let mail = smtp.messages().first().expect("delivered").data.clone();
    let [pixel] = &link_tokens(&mail, "/t/o/")[..] else {
        panic!("one pixel in {mail}");
    };
    let [click] = &link_tokens(&mail, "/t/c/")[..] else {
        panic!("one tracked link in {mail}");
    };
    let [unsubscribe] = &link_tokens(&mail, "/u/")[..] else {
        panic!("one unsubscribe link in {mail}");
    };

    let gif = client.open_pixel(pixel).await.expect("pixel");
    assert_eq!(&gif[..6], b"GIF89a");
    assert_eq!(
        client.follow_link(click).await.expect("redirect"),
        "https://shop.example/orders/7",
        "the target is returned, not fetched"
    );
    let read = client
        .get_message(account, message.id)
        .await
        .expect("message");
    assert!(
        read.opened_at.is_some() && read.clicked_at.is_some(),
        "{read:?}"
    );

    let page = client.unsubscribe_page(unsubscribe).await.expect("page");
    assert!(page.contains("grace@example.com"), "{page}");
    let one_click = UnsubscribeForm {
        list_unsubscribe: Some("One-Click".into()),
        ..UnsubscribeForm::default()
    };
    let done = client
        .unsubscribe_post(unsubscribe, &one_click)
        .await
        .expect("unsubscribed");
    assert!(done.contains("unsubscribed"), "{done}");
    let contact = client
        .get_contact(account, message.contact_id)
        .await
        .expect("contact");
    assert!(contact.unsubscribe_date.is_some(), "{contact:?}");
    let today = client.message_stats(account).await.expect("stats");
    let today = today.last().expect("today");
    assert_eq!((today.opened, today.clicked, today.unsubscribed), (1, 1, 1));
}
