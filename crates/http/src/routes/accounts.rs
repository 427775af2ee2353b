//! `/v2/accounts`, members and the webhook configuration.

use actix_web::{delete, get, patch, post, put, web};
use mailroom_app::{accounts, AppError, Services};
use mailroom_domain::{webhook::WebhookSettingsInput, UserId, ValidationErrors};

use crate::{
    blocking::run_blocking,
    dto::PageEnvelope,
    extract::{record_id, Caller, JsonBody},
    problem::{ApiError, Problem},
    routes::accounts_dto::{
        AccountDto, AddMemberBody, CreateAccountBody, MemberDto, MemberRoleBody, SecretView,
        UpdateAccountBody, WebhookBody, WebhookDto,
    },
    tenancy::Membership,
};

/// Create an account owned by the caller, with starter data.
#[utoipa::path(
    tag = "accounts", request_body = CreateAccountBody, security(("bearer" = [])),
    responses(
        (status = 200, body = AccountDto), (status = 400, body = Problem), (status = 401, body = Problem),
        (status = 403, body = Problem)
    )
)]
#[post("/accounts")]
pub(crate) async fn create_account(
    services: web::Data<Services>,
    caller: Caller,
    body: JsonBody<CreateAccountBody>,
) -> Result<web::Json<AccountDto>, ApiError> {
    let body = body.0;
    let request = accounts::CreateAccountRequest {
        name: body.name,
        click_tracking: body.click_tracking,
        open_tracking: body.open_tracking,
    };
    let account =
        run_blocking(move || accounts::create_account(&services, &caller.0, request)).await?;
    Ok(web::Json(account.into()))
}

/// The caller's accounts, all in one envelope.
#[utoipa::path(
    tag = "accounts", security(("bearer" = [])),
    responses((status = 200, body = PageEnvelope<AccountDto>), (status = 401, body = Problem))
)]
#[get("/accounts")]
pub(crate) async fn list_accounts(
    services: web::Data<Services>,
    caller: Caller,
) -> Result<web::Json<PageEnvelope<AccountDto>>, ApiError> {
    let list = run_blocking(move || accounts::list_accounts(&services, &caller.0)).await?;
    Ok(web::Json(PageEnvelope::whole(
        list.into_iter().map(AccountDto::from).collect(),
    )))
}

/// An account, with its webhook secrets masked.
#[utoipa::path(
    tag = "accounts", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = AccountDto), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[get("/accounts/{accountId}")]
pub(crate) async fn get_account(
    services: web::Data<Services>,
    member: Membership,
) -> Result<web::Json<AccountDto>, ApiError> {
    let found = run_blocking(move || accounts::get_account(&services, &member.0)).await?;
    Ok(web::Json(found.into()))
}

/// Partially update an account; `{}` is refused.
#[utoipa::path(
    tag = "accounts", request_body = UpdateAccountBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = AccountDto), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[patch("/accounts/{accountId}")]
pub(crate) async fn update_account(
    services: web::Data<Services>,
    member: Membership,
    body: JsonBody<UpdateAccountBody>,
) -> Result<web::Json<AccountDto>, ApiError> {
    let body = body.0;
    let mut errors = ValidationErrors::new();
    let request = accounts::UpdateAccountRequest {
        name: body.name.not_null("name", &mut errors),
        click_tracking: body.click_tracking.not_null("clickTracking", &mut errors),
        open_tracking: body.open_tracking.not_null("openTracking", &mut errors),
        branding: body.branding.map(|branding| accounts::BrandingRequest {
            display_name: branding.display_name,
            logo_url: branding.logo_url,
            accent_color: branding.accent_color,
        }),
        refuse_clear_text_auth: body
            .refuse_clear_text_auth
            .not_null("refuseClearTextAuth", &mut errors),
    };
    errors.into_result().map_err(AppError::Invalid)?;
    let updated =
        run_blocking(move || accounts::update_account(&services, &member.0, request)).await?;
    Ok(web::Json(updated.into()))
}

/// The account's members, all in one envelope.
#[utoipa::path(
    tag = "accounts", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = PageEnvelope<MemberDto>), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/members")]
pub(crate) async fn list_members(
    services: web::Data<Services>,
    member: Membership,
) -> Result<web::Json<PageEnvelope<MemberDto>>, ApiError> {
    let members = run_blocking(move || accounts::list_members(&services, &member.0)).await?;
    Ok(web::Json(PageEnvelope::whole(
        members.into_iter().map(MemberDto::from).collect(),
    )))
}

/// Add a member (`admin` or `member`); a user with an unknown email is created. Owner and
/// admins only.
#[utoipa::path(
    tag = "accounts", request_body = AddMemberBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = MemberDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem))
)]
#[post("/accounts/{accountId}/members")]
pub(crate) async fn add_member(
    services: web::Data<Services>,
    member: Membership,
    body: JsonBody<AddMemberBody>,
) -> Result<web::Json<MemberDto>, ApiError> {
    let body = body.0;
    let request = accounts::AddMemberRequest {
        email: body.email,
        role: body.role,
    };
    let added = run_blocking(move || accounts::add_member(&services, &member.0, request)).await?;
    Ok(web::Json(added.into()))
}

/// Change a member's role; the owner's never changes. Owner and admins only.
#[utoipa::path(
    tag = "accounts", request_body = MemberRoleBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("userId" = String, Path, description = "The member's user id")),
    responses((status = 200, body = MemberDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem))
)]
#[patch("/accounts/{accountId}/members/{userId}")]
pub(crate) async fn change_member_role(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
    body: JsonBody<MemberRoleBody>,
) -> Result<web::Json<MemberDto>, ApiError> {
    let target: UserId = record_id(&path.1)?;
    let role = body.0.role;
    let changed =
        run_blocking(move || accounts::change_member_role(&services, &member.0, target, role))
            .await?;
    Ok(web::Json(changed.into()))
}

/// Remove a member (owner and admins; any other member may remove only themselves); the
/// owner stays. Their tokens get 401 on the account from their next request.
#[utoipa::path(
    tag = "accounts", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("userId" = String, Path, description = "The member's user id")),
    responses((status = 200, body = MemberDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem))
)]
#[delete("/accounts/{accountId}/members/{userId}")]
pub(crate) async fn remove_member(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<MemberDto>, ApiError> {
    let target: UserId = record_id(&path.1)?;
    let removed =
        run_blocking(move || accounts::remove_member(&services, &member.0, target)).await?;
    Ok(web::Json(removed.into()))
}

/// Replace the webhook configuration; the response carries the signing secret whole.
#[utoipa::path(
    tag = "accounts", request_body = WebhookBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = WebhookDto), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[put("/accounts/{accountId}/webhooks")]
pub(crate) async fn set_webhooks(
    services: web::Data<Services>,
    member: Membership,
    body: JsonBody<WebhookBody>,
) -> Result<web::Json<WebhookDto>, ApiError> {
    let body = body.0;
    let config = run_blocking(move || {
        let input = WebhookSettingsInput {
            url: body.url.as_deref(),
            auth_type: body.auth_type.as_deref(),
            events: body
                .events
                .as_ref()
                .map(|list| list.iter().map(String::as_str).collect()),
            username: body.username.as_deref(),
            password_or_token: body.password_or_token.as_deref(),
            signing_secret: body.signing_secret.as_deref(),
        };
        accounts::set_webhooks(&services, &member.0, input)
    })
    .await?;
    Ok(web::Json(WebhookDto::from_config(
        config,
        SecretView::SigningSecretRevealed,
    )))
}
