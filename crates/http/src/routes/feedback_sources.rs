//! `/v2/accounts/{accountId}/feedback-sources` (managed with a token) and
//! `POST /v2/feedback-sources/{accountId}/{sourceId}/events` (posted by the provider,
//! authenticated by the source's provider credentials, not by a token).

use std::time::Instant;

use actix_web::{delete, get, http::StatusCode, post, web, HttpRequest};
use mailroom_app::{
    feedback_sources::{self, ProviderRequest, READ_HEADERS},
    Services,
};
use mailroom_domain::{token::TokenHash, AccountId, FeedbackSourceId};

use crate::{
    auth_failures::{AuthFailureGuard, Verdict},
    blocking::run_blocking,
    extract::{record_id, JsonBody},
    problem::{ApiError, Problem},
    routes::feedback_sources_dto::{
        FeedbackSourceBody, FeedbackSourceDto, FeedbackSourceList, ProviderEventsDto,
    },
    tenancy::Membership,
};

/// The account's feedback sources, oldest first (at most 20, so unpaged).
#[utoipa::path(
    tag = "feedback-sources", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = FeedbackSourceList), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/feedback-sources")]
pub(crate) async fn list_feedback_sources(
    services: web::Data<Services>,
    member: Membership,
) -> Result<web::Json<FeedbackSourceList>, ApiError> {
    let sources =
        run_blocking(move || feedback_sources::list_feedback_sources(&services, &member.0)).await?;
    Ok(web::Json(FeedbackSourceList {
        items: sources.into_iter().map(FeedbackSourceDto::from).collect(),
    }))
}

/// One feedback source.
#[utoipa::path(
    tag = "feedback-sources", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("sourceId" = String, Path, description = "Feedback source id")),
    responses((status = 200, body = FeedbackSourceDto), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[get("/accounts/{accountId}/feedback-sources/{sourceId}")]
pub(crate) async fn get_feedback_source(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<FeedbackSourceDto>, ApiError> {
    let id: FeedbackSourceId = record_id(&path.1)?;
    let source =
        run_blocking(move || feedback_sources::get_feedback_source(&services, &member.0, id))
            .await?;
    Ok(web::Json(source.into()))
}

/// Create a feedback source: where one provider posts its bounce and complaint events
/// for this account. Set exactly the field of the provider: `topicArns` (SES), `signingKey`
/// (Mailgun), `publicKey` (SendGrid); Postmark takes none, and the answer carries the
/// generated `secret` and `urlWithCredentials`, shown only in this answer.
#[utoipa::path(
    tag = "feedback-sources", request_body = FeedbackSourceBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = FeedbackSourceDto), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[post("/accounts/{accountId}/feedback-sources")]
pub(crate) async fn create_feedback_source(
    services: web::Data<Services>,
    member: Membership,
    body: JsonBody<FeedbackSourceBody>,
) -> Result<web::Json<FeedbackSourceDto>, ApiError> {
    let input = body.0.into();
    let created =
        run_blocking(move || feedback_sources::create_feedback_source(&services, &member.0, input))
            .await?;
    Ok(web::Json(created.into()))
}

/// Delete a feedback source; its URL refuses the provider's posts from then on.
#[utoipa::path(
    tag = "feedback-sources", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("sourceId" = String, Path, description = "Feedback source id")),
    responses((status = 200, body = FeedbackSourceDto), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[delete("/accounts/{accountId}/feedback-sources/{sourceId}")]
pub(crate) async fn delete_feedback_source(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<FeedbackSourceDto>, ApiError> {
    let id: FeedbackSourceId = record_id(&path.1)?;
    let source =
        run_blocking(move || feedback_sources::delete_feedback_source(&services, &member.0, id))
            .await?;
    Ok(web::Json(source.into()))
}

/// A provider's bounce and complaint events for one source (the source's `url`). No
/// token: the provider's signature (SNS, Mailgun, SendGrid) or the basic-auth secret
/// (Postmark) authenticates it for this source alone. An unknown source and a failed
/// authentication both answer 401 and count as failed authentications of the client
/// address. Events that match nothing of the account are accepted and counted as
/// ignored; a malformed payload of an authenticated request is a 400.
#[utoipa::path(
    tag = "feedback-sources",
    request_body(content = String, content_type = "application/json", description = "The provider's payload as it sends it"),
    params(("accountId" = String, Path, description = "Account id"), ("sourceId" = String, Path, description = "Feedback source id")),
    responses(
        (status = 200, body = ProviderEventsDto),
        (status = 400, body = Problem, description = "An authenticated request whose payload is malformed"),
        (status = 401, body = Problem, description = "Unknown source, or the provider's authentication failed"),
        (status = 413, body = Problem),
        (status = 429, body = Problem, description = "Too many failed authentications from this address"),
        (status = 503, body = Problem, description = "The SNS certificate or confirmation could not be fetched; the provider retries")
    )
)]
#[post("/feedback-sources/{accountId}/{sourceId}/events")]
pub(crate) async fn receive_provider_events(
    req: HttpRequest,
    services: web::Data<Services>,
    guard: web::Data<AuthFailureGuard>,
    path: web::Path<(String, String)>,
    body: Result<web::Bytes, actix_web::Error>,
) -> Result<web::Json<ProviderEventsDto>, ApiError> {
    let client = guard.client_key(&req);
    let refuse = || match guard.failed(client, Instant::now()) {
        Some(decision) => ApiError::too_many_failed_authentications(decision.retry_after_secs),
        None => ApiError::unauthorized(),
    };
    // A malformed id cannot name a source: refused like an unknown one.
    let (Ok(account), Ok(id)) = (AccountId::parse(&path.0), FeedbackSourceId::parse(&path.1))
    else {
        if let Some(retry_after) = guard.refused(client, Instant::now()) {
            return Err(ApiError::too_many_failed_authentications(retry_after));
        }
        return Err(refuse());
    };
    // A provider posts from addresses it shares between all its customers, so another
    // tenant's misconfigured source can spend that address's allowance. A source that
    // authenticated from this very address recently stays reachable from it, as a
    // known-good token does; from any other address it is refused like the rest (its ids
    // are in its public URL: keyed by them alone, the exemption let any refused address
    // go on buying lookups and SNS certificate fetches).
    let known = source_key(account, id, client);
    if let Verdict::Refuse(retry_after) = guard.before_lookup(client, &known, Instant::now()) {
        return Err(ApiError::too_many_failed_authentications(retry_after));
    }
    let body = body.map_err(|error| {
        if error.as_response_error().status_code() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "the body is larger than 1 MiB",
            )
        } else {
            ApiError::bad_request(format!("the body could not be read: {error}"))
        }
    })?;
    let headers = READ_HEADERS
        .iter()
        .filter_map(|name| {
            let value = req.headers().get(*name)?.to_str().ok()?;
            Some(((*name).to_owned(), value.to_owned()))
        })
        .collect();
    let request = ProviderRequest {
        body: body.to_vec(),
        headers,
    };
    match run_blocking(move || {
        feedback_sources::receive_provider_events(&services, account, id, &request)
    })
    .await
    {
        Ok(outcome) => {
            guard.succeeded(&known, Instant::now());
            Ok(web::Json(outcome.into()))
        }
        Err(error) if error.status() == StatusCode::UNAUTHORIZED => Err(refuse()),
        Err(error) => Err(error),
    }
}

/// The key a source is remembered by in the guard's known-good set, for the client
/// address it authenticated from: a SHA-256 of its two ids and the address (the set
/// takes 32-byte keys).
fn source_key(
    account: AccountId,
    id: FeedbackSourceId,
    client: Option<std::net::IpAddr>,
) -> TokenHash {
    use sha2::Digest as _;
    let mut hasher = sha2::Sha256::new();
    hasher.update(b"feedback-source\0");
    hasher.update(account.as_uuid().as_bytes());
    hasher.update(id.as_uuid().as_bytes());
    hasher.update(
        client
            .map(|ip| ip.to_string())
            .unwrap_or_default()
            .as_bytes(),
    );
    TokenHash(hasher.finalize().into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sources_known_good_key_names_its_client_address() {
        let account = AccountId::from_uuid(mailroom_domain::Uuid::from_u128(1));
        let id = FeedbackSourceId::from_uuid(mailroom_domain::Uuid::from_u128(2));
        let provider = Some("203.0.113.1".parse().unwrap());
        let other = Some("198.51.100.7".parse().unwrap());
        assert_eq!(
            source_key(account, id, provider),
            source_key(account, id, provider)
        );
        assert_ne!(
            source_key(account, id, provider),
            source_key(account, id, other)
        );
        assert_ne!(
            source_key(account, id, provider),
            source_key(account, id, None)
        );
    }
}
