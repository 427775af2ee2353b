//! The logs: messages (filtered by status; one message with its attempts and the last
//! SMTP reply) and webhook events (filtered by status and type, with a retry button), over
//! the use cases of `GET …/messages`, `GET …/webhook-events` and `POST …/retry`.

use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use mailroom_app::{
    messages::{get_message, list_messages},
    webhook_events::{list_webhook_events, retry_webhook_event},
    AppError,
};
use mailroom_domain::{
    message::{MessageFilter, MessageStatus},
    webhook::WebhookEventType,
    webhook_event::{WebhookEventFilter, WebhookEventStatus},
    ContactId, MessageId, WebhookEventId,
};
use serde::{Deserialize, Serialize};

use super::{
    blocking, error_page,
    page_kit::{
        account_id, account_page, account_session, member, page_at, query_tail, respond, Pager,
    },
    pages::{day_and_minute, see_other, signed_in_form, CsrfForm},
};

#[derive(Debug, Default, Deserialize, Serialize)]
pub(super) struct MessageQuery {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    contact: Option<String>,
    #[serde(default, skip_serializing)]
    start: Option<u64>,
}

#[derive(Debug, Serialize)]
struct MessageRow {
    id: String,
    email: String,
    kind: &'static str,
    status: &'static str,
    attempts: u32,
    created_at: String,
    last_reply: Option<String>,
    test: bool,
}

/// `GET /console/accounts/{id}/messages`.
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
            let mut errors = Vec::new();
            let mut filter = MessageFilter {
                status: None,
                contact_id: None,
                announcement_id: None,
            };
            if let Some(status) = params.status.as_deref().filter(|s| !s.is_empty()) {
                match MessageStatus::parse(status) {
                    Some(status) => filter.status = Some(status),
                    None => errors.push("Status: not a message status."),
                }
            }
            if let Some(contact) = params.contact.as_deref().filter(|s| !s.is_empty()) {
                match ContactId::parse(contact) {
                    Ok(contact) => filter.contact_id = Some(contact),
                    Err(_) => errors.push("Contact: not a contact id."),
                }
            }
            let page = page_at(params.start);
            let rows: Vec<MessageRow> = if errors.is_empty() {
                list_messages(&services, &member, &filter, page)?
                    .into_iter()
                    .map(|message| MessageRow {
                        id: message.id.to_string(),
                        email: message.email,
                        kind: message.kind.as_str(),
                        status: message.status.as_str(),
                        attempts: message.attempts,
                        created_at: day_and_minute(message.created_at),
                        last_reply: message.last_reply,
                        test: message.test,
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let tail = query_tail(&[
                ("status", params.status.as_deref()),
                ("contact", params.contact.as_deref()),
            ]);
            let pager = Pager::new(page, rows.len(), &tail);
            let statuses: Vec<&str> = MessageStatus::ALL.iter().map(|s| s.as_str()).collect();
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
                    messages => rows, filters => params, statuses => statuses, errors => errors,
                    pager => pager,
                },
            )
        })
        .await,
    )
}

/// `GET /console/accounts/{id}/messages/{messageId}`: one message, its attempts and the
/// last reply of the receiving server.
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
                        announcement_id => found.announcement_id.map(|id| id.to_string()),
                        data => data,
                    },
                },
            )
        })
        .await,
    )
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
