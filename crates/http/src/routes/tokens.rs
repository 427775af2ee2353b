//! `/v2/users/me/tokens`.

use actix_web::{delete, get, post, web};
use mailroom_app::{tokens, Services};
use mailroom_domain::TokenId;

use crate::{
    blocking::run_blocking,
    dto::PageEnvelope,
    extract::{record_id, Caller, JsonBody},
    problem::{ApiError, Problem},
    routes::tokens_dto::{CreateTokenBody, TokenDto},
};

/// Issue a personal access token; the raw value is in this response only.
#[utoipa::path(
    tag = "tokens", request_body = CreateTokenBody, security(("bearer" = [])),
    responses((status = 200, body = TokenDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem))
)]
#[post("/users/me/tokens")]
pub(crate) async fn create_token(
    services: web::Data<Services>,
    caller: Caller,
    body: JsonBody<CreateTokenBody>,
) -> Result<web::Json<TokenDto>, ApiError> {
    let body = body.0;
    let request = tokens::IssueTokenRequest {
        name: body.name,
        expires_in_days: body.expires_in_days,
        scope: body.scope,
        account_ids: body.account_ids,
    };
    let issued =
        run_blocking(move || tokens::issue_token_as(&services, &caller.0, request)).await?;
    Ok(web::Json(issued.into()))
}

/// List the caller's tokens (never the raw values), all in one envelope.
#[utoipa::path(
    tag = "tokens", security(("bearer" = [])),
    responses((status = 200, body = PageEnvelope<TokenDto>), (status = 401, body = Problem), (status = 403, body = Problem))
)]
#[get("/users/me/tokens")]
pub(crate) async fn list_tokens(
    services: web::Data<Services>,
    caller: Caller,
) -> Result<web::Json<PageEnvelope<TokenDto>>, ApiError> {
    let records = run_blocking(move || tokens::list_tokens(&services, &caller.0)).await?;
    Ok(web::Json(PageEnvelope::whole(
        records.into_iter().map(TokenDto::from).collect(),
    )))
}

/// Revoke one of the caller's tokens.
#[utoipa::path(
    tag = "tokens", security(("bearer" = [])),
    params(("tokenId" = String, Path, description = "Token id")),
    responses((status = 200, body = TokenDto), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem))
)]
#[delete("/users/me/tokens/{tokenId}")]
pub(crate) async fn revoke_token(
    services: web::Data<Services>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<web::Json<TokenDto>, ApiError> {
    let token: TokenId = record_id(&path)?;
    let record = run_blocking(move || tokens::revoke_token(&services, &caller.0, token)).await?;
    Ok(web::Json(record.into()))
}
