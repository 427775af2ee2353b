//! An account's settings page: its name and tracking flags (`PATCH /v2/accounts/{id}`),
//! and its webhook settings (`PUT …/webhooks`), whose signing secret is shown once, on
//! the page that answers the form that created or rotated it.

use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use mailroom_app::{
    accounts::{get_account, set_webhooks, update_account, BrandingRequest, UpdateAccountRequest},
    console::SignedIn,
    AppError, Services,
};
use mailroom_domain::{
    account::Account,
    patch::Field,
    webhook::{WebhookEventType, WebhookSettingsInput},
    AccountId, FieldError,
};
use serde::Serialize;

use super::{
    page_kit::{
        account_form, account_page, account_session, member, respond, FormErrors, FormField, Pairs,
    },
    pages::see_other,
    render,
};

#[derive(Debug, Serialize)]
struct EventChoice {
    value: &'static str,
    id: String,
    checked: bool,
}

#[derive(Debug, Serialize, Default)]
struct WebhookView {
    url: String,
    auth_type: String,
    username: String,
    secret_suffix: Option<String>,
}

/// What the settings page shows besides the stored account.
#[derive(Default)]
struct Outcome<'a> {
    saved: Option<&'a str>,
    revealed_secret: Option<String>,
    account_errors: Vec<FieldError>,
    webhook_errors: Vec<FieldError>,
    /// The webhook form as submitted, when it is shown again with errors.
    webhook_form: Option<(WebhookView, Vec<String>)>,
    /// The account form as submitted, when it is shown again with errors: what was
    /// typed stays in the fields.
    account_form: Option<&'a Pairs>,
}

fn settings_page(
    services: &Services,
    signed_in: &SignedIn,
    account: AccountId,
    stored: &Account,
    status: StatusCode,
    outcome: Outcome<'_>,
) -> Result<render::Page, AppError> {
    let (webhook, events) = outcome.webhook_form.unwrap_or_else(|| {
        stored.webhooks.as_ref().map_or_else(
            || {
                (
                    WebhookView {
                        auth_type: "none".to_owned(),
                        ..WebhookView::default()
                    },
                    WebhookEventType::ALL
                        .iter()
                        .map(|event| event.as_str().to_owned())
                        .collect(),
                )
            },
            |config| {
                (
                    WebhookView {
                        url: config.url.as_str().to_owned(),
                        auth_type: config.auth_type.as_str().to_owned(),
                        username: config.username.clone().unwrap_or_default(),
                        secret_suffix: Some(config.signing_secret.secret().masked_suffix()),
                    },
                    config
                        .events
                        .iter()
                        .map(|event| event.as_str().to_owned())
                        .collect(),
                )
            },
        )
    });
    let choices: Vec<EventChoice> = WebhookEventType::ALL
        .iter()
        .map(|event| EventChoice {
            value: event.as_str(),
            id: format!("event-{}", event.as_str().replace('.', "-")),
            checked: events.iter().any(|chosen| chosen == event.as_str()),
        })
        .collect();
    account_page(
        services,
        signed_in,
        account,
        status,
        "settings.html",
        ("Settings", "settings"),
        minijinja::context! {
            account => match outcome.account_form {
                Some(typed) => minijinja::context! {
                    name => typed.get("name"),
                    click_tracking => typed.get("click_tracking").is_some(),
                    open_tracking => typed.get("open_tracking").is_some(),
                    refuse_clear_text_auth => typed.get("refuse_clear_text_auth").is_some(),
                    configured => stored.webhooks.is_some(),
                    display_name => typed.get("display_name"),
                    logo_url => typed.get("logo_url"),
                    accent_color => typed.get("accent_color"),
                },
                None => minijinja::context! {
                    name => stored.name.as_str(),
                    click_tracking => stored.click_tracking,
                    open_tracking => stored.open_tracking,
                    refuse_clear_text_auth => stored.refuse_clear_text_auth,
                    configured => stored.webhooks.is_some(),
                    display_name => stored.branding.display_name.as_ref().map(|name| name.as_str()),
                    logo_url => stored.branding.logo_url.as_ref().map(|url| url.as_str()),
                    accent_color => stored.branding.accent_color.as_ref().map(|color| color.to_hex()),
                },
            },
            webhook => webhook,
            events => choices,
            saved => outcome.saved,
            revealed_secret => outcome.revealed_secret,
            account_errors => FormErrors::new(&outcome.account_errors, ACCOUNT_FIELDS),
            webhook_errors => FormErrors::new(&outcome.webhook_errors, WEBHOOK_FIELDS),
        },
    )
}

#[derive(Debug, serde::Deserialize)]
pub(super) struct SavedQuery {
    #[serde(default)]
    saved: Option<String>,
}

/// `GET /console/accounts/{id}/settings`.
pub(super) async fn show(
    req: HttpRequest,
    path: web::Path<String>,
    query: web::Query<SavedQuery>,
) -> HttpResponse {
    let (services, signed_in, account) = match account_session(&req, &path).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let saved = query.into_inner().saved;
    respond(
        super::blocking(move || {
            let member = member(&services, &signed_in, account, "GET", "")?;
            let stored = get_account(&services, &member)?;
            let saved = match saved.as_deref() {
                Some("account") => Some("The settings were saved."),
                _ => None,
            };
            settings_page(
                &services,
                &signed_in,
                account,
                &stored,
                StatusCode::OK,
                Outcome {
                    saved,
                    ..Outcome::default()
                },
            )
        })
        .await,
    )
}

/// The account form's fields, by the API's names for them.
const ACCOUNT_FIELDS: &[FormField] = &[
    FormField {
        api: "name",
        name: "name",
        label: "Name",
    },
    FormField {
        api: "branding.displayName",
        name: "display_name",
        label: "Display name",
    },
    FormField {
        api: "branding.logoUrl",
        name: "logo_url",
        label: "Logo URL",
    },
    FormField {
        api: "branding.accentColor",
        name: "accent_color",
        label: "Accent colour",
    },
];

/// The webhook form's fields, by the API's names for them.
const WEBHOOK_FIELDS: &[FormField] = &[
    FormField {
        api: "url",
        name: "url",
        label: "Endpoint URL",
    },
    FormField {
        api: "events",
        name: "events",
        label: "Events delivered",
    },
    FormField {
        api: "authType",
        name: "auth_type",
        label: "Authentication",
    },
    FormField {
        api: "username",
        name: "username",
        label: "Username",
    },
    FormField {
        api: "passwordOrToken",
        name: "password_or_token",
        label: "Password or token",
    },
    FormField {
        api: "signingSecret",
        name: "signing_secret",
        label: "New signing secret",
    },
];

/// `POST /console/accounts/{id}/settings`: name, tracking flags and the public pages'
/// branding. An unchecked box is absent from the form, so the form carries `tracking=1`
/// to say the boxes were shown; an emptied branding field clears that part.
pub(super) async fn update(
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Bytes,
) -> HttpResponse {
    let (services, signed_in, form, account) = match account_form::<Pairs>(&req, &body, &path).await
    {
        Ok(found) => found,
        Err(response) => return response,
    };
    let outcome = super::blocking(move || {
        let member = member(&services, &signed_in, account, "PATCH", "")?;
        let shown = form.get("tracking").is_some();
        let request = UpdateAccountRequest {
            name: form.get("name").map(str::to_owned),
            click_tracking: shown.then(|| form.get("click_tracking").is_some()),
            open_tracking: shown.then(|| form.get("open_tracking").is_some()),
            branding: if shown {
                Field::Value(branding_request(&form))
            } else {
                Field::Absent
            },
            refuse_clear_text_auth: shown.then(|| form.get("refuse_clear_text_auth").is_some()),
        };
        match update_account(&services, &member, request) {
            Ok(_) => Ok(None),
            Err(AppError::Invalid(errors)) => {
                let stored = get_account(&services, &member)?;
                Ok(Some(settings_page(
                    &services,
                    &signed_in,
                    account,
                    &stored,
                    StatusCode::BAD_REQUEST,
                    Outcome {
                        account_errors: errors.0,
                        account_form: Some(&form),
                        ..Outcome::default()
                    },
                )?))
            }
            Err(other) => Err(other),
        }
    })
    .await;
    match outcome {
        Ok(None) => see_other(&format!(
            "/console/accounts/{account}/settings?saved=account"
        )),
        Ok(Some(page)) => page.into(),
        Err(error) => super::error_page(&error),
    }
}

/// The branding fields of the settings form: each empty field clears its part, as
/// `null` does over the API.
fn branding_request(form: &Pairs) -> BrandingRequest {
    let field = |name: &str| match form.get(name).map(str::trim) {
        Some("") | None => Field::Null,
        Some(value) => Field::Value(value.to_owned()),
    };
    BrandingRequest {
        display_name: field("display_name"),
        logo_url: field("logo_url"),
        accent_color: field("accent_color"),
    }
}

/// `POST /console/accounts/{id}/webhooks`: saves the webhook settings and answers with
/// the page that shows the signing secret, this once.
pub(super) async fn set(
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Bytes,
) -> HttpResponse {
    let (services, signed_in, form, account) = match account_form::<Pairs>(&req, &body, &path).await
    {
        Ok(found) => found,
        Err(response) => return response,
    };
    respond(
        super::blocking(move || {
            let member = member(&services, &signed_in, account, "PUT", "/webhooks")?;
            let filled = |name: &str| form.get(name).filter(|value| !value.is_empty());
            // The secret is rotated only when asked to; a blank field keeps it.
            let input = WebhookSettingsInput {
                url: Some(form.get("url").unwrap_or("")),
                auth_type: Some(form.get("auth_type").unwrap_or("none")),
                events: Some(form.all("events")),
                username: filled("username"),
                password_or_token: filled("password_or_token"),
                signing_secret: filled("signing_secret"),
            };
            match set_webhooks(&services, &member, input) {
                Ok(config) => {
                    let stored = get_account(&services, &member)?;
                    settings_page(
                        &services,
                        &signed_in,
                        account,
                        &stored,
                        StatusCode::OK,
                        Outcome {
                            saved: Some("The webhook settings were saved."),
                            revealed_secret: Some(
                                config.signing_secret.secret().expose().to_owned(),
                            ),
                            ..Outcome::default()
                        },
                    )
                }
                Err(AppError::Invalid(errors)) => {
                    let stored = get_account(&services, &member)?;
                    let submitted = WebhookView {
                        url: form.get("url").unwrap_or("").to_owned(),
                        auth_type: form.get("auth_type").unwrap_or("none").to_owned(),
                        username: form.get("username").unwrap_or("").to_owned(),
                        secret_suffix: stored
                            .webhooks
                            .as_ref()
                            .map(|config| config.signing_secret.secret().masked_suffix()),
                    };
                    let events = form.all("events").into_iter().map(str::to_owned).collect();
                    settings_page(
                        &services,
                        &signed_in,
                        account,
                        &stored,
                        StatusCode::BAD_REQUEST,
                        Outcome {
                            webhook_errors: errors.0,
                            webhook_form: Some((submitted, events)),
                            ..Outcome::default()
                        },
                    )
                }
                Err(other) => Err(other),
            }
        })
        .await,
    )
}
