//! The logs: messages (newest first, filtered by status, address, template and
//! announcement; one message with its names, content and timeline) and webhook events (filtered by status and type, with a retry button), over
//! the use cases of `GET …/messages`, `GET …/webhook-events` and `POST …/retry`.

use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use mailroom_app::{
    announcements::get_announcement,
    auth::Member,
    automations::get_automation,
    messages::{get_message, list_messages},
    templates::{get_template, preview_template, PreviewRequest},
    tracking::{message_engagement, Engagement},
    webhook_events::{list_webhook_events, retry_webhook_event},
    AppError, Services,
};
use mailroom_domain::{
    email::EmailAddress,
    message::{Message, MessageFilter, MessageOrder, MessageStatus},
    webhook::WebhookEventType,
    webhook_event::{WebhookEventFilter, WebhookEventStatus},
    AnnouncementId, FieldError, MessageId, TemplateId, WebhookEventId,
};
use serde::{Deserialize, Serialize};

use super::{
    blocking, error_page,
    page_kit::{
        account_id, account_page, account_session, announcement_choices, choice_label, member,
        page_at, query_tail, respond, template_choices, unless_gone, FormErrors, FormField, Pager,
    },
    pages::{day_and_minute, see_other, signed_in_form, CsrfForm},
    template_pages::{preview_html, sandboxed_html},
};

#[derive(Debug, Default, Deserialize, Serialize)]
pub(super) struct MessageQuery {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    email: Option<String>,
    #[serde(default)]
    template: Option<String>,
    #[serde(default)]
    announcement: Option<String>,
    #[serde(default, skip_serializing)]
    start: Option<u64>,
}

/// A filter field that was filled in, trimmed.
fn filled(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

impl MessageQuery {
    /// The log's filter, or each field's error (as the form labels it).
    fn filter(&self) -> Result<MessageFilter, Vec<FieldError>> {
        let mut filter = MessageFilter::default();
        let mut errors = Vec::new();
        if let Some(status) = filled(&self.status) {
            match MessageStatus::parse(status) {
                Some(status) => filter.status = Some(status),
                None => errors.push(FieldError::new("status", "is not a message status")),
            }
        }
        if let Some(email) = filled(&self.email) {
            match EmailAddress::parse(email) {
                Ok(email) => filter.email = Some(email),
                Err(_) => errors.push(FieldError::new("email", "is not an email address")),
            }
        }
        if let Some(template) = filled(&self.template) {
            match TemplateId::parse(template) {
                Ok(template) => filter.template_id = Some(template),
                Err(_) => errors.push(FieldError::new("template", "is not one of the templates")),
            }
        }
        if let Some(announcement) = filled(&self.announcement) {
            match AnnouncementId::parse(announcement) {
                Ok(announcement) => filter.announcement_id = Some(announcement),
                Err(_) => errors.push(FieldError::new(
                    "announcement",
                    "is not one of the announcements",
                )),
            }
        }
        if errors.is_empty() {
            Ok(filter)
        } else {
            Err(errors)
        }
    }
}

#[derive(Debug, Serialize)]
struct MessageRow {
    id: String,
    email: String,
    kind: &'static str,
    template: String,
    announcement: Option<String>,
    status: &'static str,
    attempts: u32,
    created_at: String,
    last_reply: Option<String>,
    test: bool,
}

/// `GET /console/accounts/{id}/messages`: the newest messages first, filtered by status,
/// address, template and announcement, each shown by name.
pub(super) async fn messages(
    req: HttpRequest,
    path: web::Path<String>,
    query: web::Query<MessageQuery>,
) -> HttpResponse {
    let (services, signed_in, account) = match account_session(&req, &path).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let params = query.into_inner();
    respond(
        blocking(move || {
            let member = member(&services, &signed_in, account, "GET", "/messages")?;
            let templates = template_choices(&services, &member)?;
            let announcements = announcement_choices(&services, &member)?;
            let page = page_at(params.start);
            let (rows, errors): (Vec<MessageRow>, Vec<FieldError>) = match params.filter() {
                Ok(filter) => {
                    let rows = list_messages(
                        &services,
                        &member,
                        &filter,
                        MessageOrder::NewestFirst,
                        page,
                    )?
                    .into_iter()
                    .map(|message| {
                        let template_id = message.template_id.to_string();
                        MessageRow {
                            id: message.id.to_string(),
                            email: message.email,
                            kind: message.kind.as_str(),
                            template: choice_label(&templates, &template_id)
                                .unwrap_or("a template")
                                .to_owned(),
                            announcement: message.announcement_id.map(|id| {
                                choice_label(&announcements, &id.to_string())
                                    .unwrap_or("an announcement")
                                    .to_owned()
                            }),
                            status: message.status.as_str(),
                            attempts: message.attempts,
                            created_at: day_and_minute(message.created_at),
                            last_reply: message.last_reply,
                            test: message.test,
                        }
                    })
                    .collect();
                    (rows, Vec::new())
                }
                Err(errors) => (Vec::new(), errors),
            };
            let tail = query_tail(&[
                ("status", params.status.as_deref()),
                ("email", params.email.as_deref()),
                ("template", params.template.as_deref()),
                ("announcement", params.announcement.as_deref()),
            ]);
            let pager = Pager::new(page, rows.len(), &tail);
            let statuses: Vec<&str> = MessageStatus::ALL.iter().map(|s| s.as_str()).collect();
            let filtered = [
                &params.status,
                &params.email,
                &params.template,
                &params.announcement,
            ]
            .iter()
            .any(|value| value.as_deref().is_some_and(|v| !v.trim().is_empty()));
            account_page(
                &services,
                &signed_in,
                account,
                if errors.is_empty() {
                    StatusCode::OK
                } else {
                    StatusCode::BAD_REQUEST
                },
                "messages.html",
                ("Messages", "messages"),
                minijinja::context! {
                    messages => rows, filters => params, filtered => filtered,
                    statuses => statuses, templates => templates,
                    announcements => announcements,
                    errors => FormErrors::new(&errors, MESSAGE_FILTERS),
                    pager => pager,
                },
            )
        })
        .await,
    )
}

/// The fields of the log's filter form.
const MESSAGE_FILTERS: &[FormField] = &[
    FormField {
        api: "status",
        name: "status",
        label: "Status",
    },
    FormField {
        api: "email",
        name: "email",
        label: "Address",
    },
    FormField {
        api: "template",
        name: "template",
        label: "Template",
    },
    FormField {
        api: "announcement",
        name: "announcement",
        label: "Announcement",
    },
];

/// One step of a message's life on its page, oldest first.
#[derive(Debug, Serialize)]
struct TimelineStep {
    at: String,
    what: String,
}

/// What a message's page knows of it besides the message itself: the names of what it
/// belongs to (`None` when that record is gone) and its opens and clicks.
struct MessageContext {
    template: Option<String>,
    announcement: Option<String>,
    automation: Option<String>,
    engagement: Engagement,
}

fn message_context(
    services: &Services,
    member: &Member,
    message: &Message,
) -> Result<MessageContext, AppError> {
    Ok(MessageContext {
        template: unless_gone(
            get_template(services, member, message.template_id).map(|found| found.name),
        )?,
        announcement: match message.announcement_id {
            Some(id) => unless_gone(get_announcement(services, member, id).map(|a| a.name))?,
            None => None,
        },
        automation: match message.automation_id {
            Some(id) => unless_gone(get_automation(services, member, id).map(|a| a.settings.name))?,
            None => None,
        },
        engagement: message_engagement(services, member, message.id)?,
    })
}

/// The steps the store keeps of a message: queued, the attempts (the latest reply only),
/// sent, the first open and click, and how it ended when it did not send.
fn timeline(message: &Message, engagement: &Engagement) -> Vec<TimelineStep> {
    let mut steps = vec![(message.created_at, "Queued".to_owned())];
    let reply = message.last_reply.as_deref().unwrap_or("no reply");
    match message.status {
        MessageStatus::Sent => {
            if let Some(at) = message.sent_at {
                steps.push((
                    at,
                    format!("Sent after {} attempt(s): {reply}", message.attempts),
                ));
            }
        }
        MessageStatus::Failed => steps.push((
            message.updated_at,
            format!("Failed after {} attempt(s): {reply}", message.attempts),
        )),
        MessageStatus::Bounced => {
            if let Some(at) = message.sent_at {
                steps.push((at, "Sent".to_owned()));
            }
            steps.push((message.updated_at, format!("Bounced: {reply}")));
        }
        MessageStatus::Skipped => steps.push((
            message.updated_at,
            format!(
                "Skipped: {}",
                message
                    .skip_reason
                    .map_or("no reason kept", |reason| reason.as_str())
            ),
        )),
        MessageStatus::Queued | MessageStatus::Sending => {
            if message.attempts > 0 {
                steps.push((
                    message.updated_at,
                    format!("Attempt {} answered: {reply}", message.attempts),
                ));
            }
        }
    }
    if let Some(at) = engagement.opened_at {
        steps.push((at, "First opened".to_owned()));
    }
    if let Some(at) = engagement.clicked_at {
        steps.push((at, "First clicked".to_owned()));
    }
    steps.sort_by_key(|(at, _)| *at);
    steps
        .into_iter()
        .map(|(at, what)| TimelineStep {
            at: day_and_minute(at),
            what,
        })
        .collect()
}

/// How the message renders now: the subject and text part, or why it does not.
#[derive(Debug, Default, Serialize)]
struct ContentView {
    subject: Option<String>,
    text: Option<String>,
    error: Option<String>,
}

fn preview_request(message: &Message) -> PreviewRequest {
    PreviewRequest {
        email: EmailAddress::parse(&message.email).ok(),
        data: message.data.clone(),
    }
}

/// `GET /console/accounts/{id}/messages/{messageId}`: one message with the names of its
/// template, announcement or automation, its content as it renders now, and its
/// timeline.
pub(super) async fn message(req: HttpRequest, path: web::Path<(String, String)>) -> HttpResponse {
    let (services, signed_in, account) = match account_session(&req, &path.0).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let Ok(id) = MessageId::parse(&path.1) else {
        return error_page(&AppError::NotFound);
    };
    respond(
        blocking(move || {
            let member = member(
                &services,
                &signed_in,
                account,
                "GET",
                &format!("/messages/{id}"),
            )?;
            let found = get_message(&services, &member, id)?;
            let context = message_context(&services, &member, &found)?;
            let content = match context.template {
                None => ContentView::default(),
                Some(_) => match preview_template(
                    &services,
                    &member,
                    found.template_id,
                    &preview_request(&found),
                ) {
                    Ok(rendered) => ContentView {
                        subject: Some(rendered.subject),
                        text: rendered.text,
                        error: None,
                    },
                    Err(AppError::Invalid(errors)) => ContentView {
                        error: Some(errors.to_string()),
                        ..ContentView::default()
                    },
                    Err(AppError::BadRequest(reason)) => ContentView {
                        error: Some(reason),
                        ..ContentView::default()
                    },
                    Err(other) => return Err(other),
                },
            };
            let steps = timeline(&found, &context.engagement);
            let data = serde_json::to_string_pretty(&found.data).unwrap_or_default();
            account_page(
                &services,
                &signed_in,
                account,
                StatusCode::OK,
                "message_detail.html",
                ("Message", "messages"),
                minijinja::context! {
                    message => minijinja::context! {
                        id => found.id.to_string(),
                        email => found.email,
                        contact_id => found.contact_id.to_string(),
                        template_id => found.template_id.to_string(),
                        template => context.template,
                        kind => found.kind.as_str(),
                        test => found.test,
                        status => found.status.as_str(),
                        skip_reason => found.skip_reason.map(|reason| reason.as_str()),
                        attempts => found.attempts,
                        next_attempt_at => found.next_attempt_at.map(day_and_minute),
                        last_reply => found.last_reply,
                        message_id_header => found.message_id_header,
                        created_at => day_and_minute(found.created_at),
                        updated_at => day_and_minute(found.updated_at),
                        sent_at => found.sent_at.map(day_and_minute),
                        automation_id => found.automation_id.map(|id| id.to_string()),
                        automation => context.automation,
                        announcement_id => found.announcement_id.map(|id| id.to_string()),
                        announcement => context.announcement,
                        data => data,
                    },
                    content => content,
                    timeline => steps,
                },
            )
        })
        .await,
    )
}

/// `GET /console/accounts/{id}/messages/{messageId}/preview`: the message's HTML as it
/// renders now, for its page's frame only.
pub(super) async fn message_preview(
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> HttpResponse {
    let (services, signed_in, account) = match account_session(&req, &path.0).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let Ok(id) = MessageId::parse(&path.1) else {
        return error_page(&AppError::NotFound);
    };
    let content = blocking(move || {
        let member = member(
            &services,
            &signed_in,
            account,
            "GET",
            &format!("/messages/{id}"),
        )?;
        let found = get_message(&services, &member, id)?;
        preview_html(preview_template(
            &services,
            &member,
            found.template_id,
            &preview_request(&found),
        ))
    })
    .await;
    sandboxed_html(content)
}

#[derive(Debug, Default, Deserialize, Serialize)]
pub(super) struct EventQuery {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    event: Option<String>,
    #[serde(default, skip_serializing)]
    start: Option<u64>,
    #[serde(default, skip_serializing)]
    retried: Option<String>,
}

#[derive(Debug, Serialize)]
struct EventRow {
    id: String,
    event_type: &'static str,
    status: &'static str,
    url: String,
    occurred_at: String,
    try_count: u32,
    last_attempt_at: Option<String>,
    last_status_code: Option<u16>,
    last_error: Option<String>,
    next_attempt_at: Option<String>,
    parent_event_id: Option<String>,
}

/// `GET /console/accounts/{id}/webhook-events`.
pub(super) async fn webhook_events(
    req: HttpRequest,
    path: web::Path<String>,
    query: web::Query<EventQuery>,
) -> HttpResponse {
    let (services, signed_in, account) = match account_session(&req, &path).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let params = query.into_inner();
    respond(
        blocking(move || {
            let member = member(&services, &signed_in, account, "GET", "/webhook-events")?;
            let mut errors = Vec::new();
            let mut filter = WebhookEventFilter::default();
            if let Some(status) = params.status.as_deref().filter(|s| !s.is_empty()) {
                match WebhookEventStatus::parse(status) {
                    Some(status) => filter.status = Some(status),
                    None => errors.push("Status: not a delivery status."),
                }
            }
            if let Some(event) = params.event.as_deref().filter(|s| !s.is_empty()) {
                match WebhookEventType::parse(event) {
                    Some(event) => filter.event_type = Some(event),
                    None => errors.push("Type: not an event type."),
                }
            }
            let page = page_at(params.start);
            let rows: Vec<EventRow> = if errors.is_empty() {
                list_webhook_events(&services, &member, &filter, page)?
                    .into_iter()
                    .map(|event| EventRow {
                        id: event.id.to_string(),
                        event_type: event.event_type.as_str(),
                        status: event.status.as_str(),
                        url: event.target.url,
                        occurred_at: day_and_minute(event.occurred_at),
                        try_count: event.try_count,
                        last_attempt_at: event.last_attempt_at.map(day_and_minute),
                        last_status_code: event.last_status_code,
                        last_error: event.last_error,
                        next_attempt_at: event.next_attempt_at.map(day_and_minute),
                        parent_event_id: event.parent_event_id.map(|id| id.to_string()),
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let tail = query_tail(&[
                ("status", params.status.as_deref()),
                ("event", params.event.as_deref()),
            ]);
            let pager = Pager::new(page, rows.len(), &tail);
            let statuses: Vec<&str> = WebhookEventStatus::ALL.iter().map(|s| s.as_str()).collect();
            let types: Vec<&str> = WebhookEventType::ALL.iter().map(|t| t.as_str()).collect();
            account_page(
                &services,
                &signed_in,
                account,
                if errors.is_empty() {
                    StatusCode::OK
                } else {
                    StatusCode::BAD_REQUEST
                },
                "webhook_events.html",
                ("Webhook events", "webhook-events"),
                minijinja::context! {
                    events => rows, filters => params, statuses => statuses, types => types,
                    errors => errors, pager => pager,
                    retried => params.retried,
                },
            )
        })
        .await,
    )
}

#[derive(Debug, Deserialize)]
pub(super) struct RetryForm {
    #[serde(default)]
    csrf: String,
}

impl CsrfForm for RetryForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

/// `POST /console/accounts/{id}/webhook-events/{eventId}/retry`: queues the delivery
/// again, then shows the log with the new event.
pub(super) async fn retry(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> HttpResponse {
    let (services, signed_in, _) = match signed_in_form::<RetryForm>(&req, &body).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let account = match account_id(&path.0) {
        Ok(id) => id,
        Err(response) => return response,
    };
    let Ok(id) = WebhookEventId::parse(&path.1) else {
        return error_page(&AppError::NotFound);
    };
    let retried = blocking(move || {
        let member = member(
            &services,
            &signed_in,
            account,
            "POST",
            &format!("/webhook-events/{id}/retry"),
        )?;
        retry_webhook_event(&services, &member, id)
    })
    .await;
    match retried {
        Ok(event) => see_other(&format!(
            "/console/accounts/{account}/webhook-events?retried={}",
            event.id
        )),
        Err(error) => error_page(&error),
    }
}
