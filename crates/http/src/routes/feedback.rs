//! `POST /v2/accounts/{accountId}/feedback`: a raw ARF complaint or DSN bounce.

use std::{future::Future, pin::Pin};

use actix_web::{
    dev::Payload,
    http::{header, StatusCode},
    post, web, FromRequest, HttpRequest,
};
use mailroom_app::{
    feedback::{self, FeedbackOutcome},
    Services,
};
use serde::Serialize;
use utoipa::ToSchema;

use crate::{
    blocking::run_blocking,
    problem::{ApiError, Problem},
    tenancy::Membership,
};

/// What recording a report did. Optional fields are omitted while unset.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackDto {
    /// `complaint`, `bounce` or `ignored` (a delay, a success notice, or a feedback type
    /// other than `abuse`: nothing was recorded).
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The `_id` of the message the report was matched to; absent when it matched only a
    /// contact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// The contact the report is about.
    pub contact_id: String,
    /// Whether this request changed anything: `false` for an ignored report and for a
    /// repeat of a report already recorded.
    pub recorded: bool,
    /// Why an ignored report records nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl From<FeedbackOutcome> for FeedbackDto {
    fn from(outcome: FeedbackOutcome) -> Self {
        Self {
            kind: outcome.kind.as_str(),
            message_id: outcome.message_id.map(|id| id.to_string()),
            contact_id: outcome.contact_id.to_string(),
            recorded: outcome.recorded,
            reason: outcome.reason,
        }
    }
}

/// A `message/rfc822` body of at most 1 MiB (the API's body limit), as bytes. The type is
/// checked before the body is read, as [`JsonBody`](crate::extract::JsonBody) does.
pub(crate) struct RawMessage(web::Bytes);

impl FromRequest for RawMessage {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let is_message = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.split(';').next())
            .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("message/rfc822"));
        let body = web::Bytes::from_request(req, payload);
        Box::pin(async move {
            if !is_message {
                return Err(ApiError::bad_request(
                    "the body must be a raw email (an ARF report or a DSN) sent with \
                     Content-Type: message/rfc822",
                ));
            }
            let bytes = body.await.map_err(|error| {
                if error.as_response_error().status_code() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::new(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "the body is larger than 1 MiB",
                    )
                } else {
                    ApiError::bad_request(format!("the body could not be read: {error}"))
                }
            })?;
            Ok(Self(bytes))
        })
    }
}

/// Record a complaint or a late bounce: the raw ARF report (RFC 5965, `Feedback-Type:
/// abuse`) or delivery status notification (RFC 3464) as received. It is matched to the
/// message by the original `Message-ID`, else by its recipient (the most recent message to
/// that address), else to the contact with that address. A complaint sets the contact's
/// `complaintDate`, counts `complained` and queues `contact.complained`; a permanent
/// failure (`Action: failed`, `Status: 5.x.x`) makes a `sent` message `bounced`, sets
/// `hardBounced`, counts `bounced` and queues `contact.bounced`. Delays and other notices
/// record nothing (`ignored`). Posting the same report again records nothing more.
#[utoipa::path(
    tag = "messages", security(("bearer" = [])),
    request_body(content = String, content_type = "message/rfc822", description = "The raw ARF or DSN message"),
    params(("accountId" = String, Path, description = "Account id")),
    responses(
        (status = 200, body = FeedbackDto),
        (status = 400, body = Problem, description = "Not a report, or it matches no message or contact"),
        (status = 401, body = Problem),
        (status = 413, body = Problem)
    )
)]
#[post("/accounts/{accountId}/feedback")]
pub(crate) async fn record_feedback(
    services: web::Data<Services>,
    member: Membership,
    body: RawMessage,
) -> Result<web::Json<FeedbackDto>, ApiError> {
    let outcome =
        run_blocking(move || feedback::record_feedback(&services, &member.0, &body.0)).await?;
    Ok(web::Json(outcome.into()))
}
