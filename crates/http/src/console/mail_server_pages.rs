//! The console's mail server pages: the list with each server's health as the delivery
//! engine last saw it, and forms that create and edit a server. Saving runs the same live
//! check as the API (connect, TLS, AUTH against the real server) and the page shows what
//! the server answered.

use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use mailroom_app::{
    auth::{verify_membership, Member, RouteCall},
    console::SignedIn,
    mail_servers::{create_mail_server, get_mail_server, list_mail_servers, update_mail_server},
    AppError, Services,
};
use mailroom_domain::{
    mail_server::{MailServer, MailServerInput},
    paging::PageRequest,
    patch::Field,
    AccountId, FieldError, MailServerId,
};
use serde::{Deserialize, Serialize};

use super::{
    blocking, error_page,
    page_kit::{account_id, account_layout, account_session, record_ids, FormErrors, FormField},
    pages::{day_and_minute, require_session, signed_in_form, CsrfForm},
    render,
};

/// How many servers the list shows; accounts have a handful.
const LISTED: u32 = 100;

fn member(
    services: &Services,
    signed_in: &SignedIn,
    account: AccountId,
    method: &str,
    rest: &str,
) -> Result<Member, AppError> {
    // The same proof, for the same call, as the API route the page stands for.
    let path = format!("/v2/accounts/{account}/mail-servers{rest}");
    let call = RouteCall {
        method,
        path: &path,
        query: "",
    };
    verify_membership(services, &signed_in.actor, account, call)
}

#[derive(Debug, Serialize)]
struct ServerItem {
    id: String,
    host: String,
    port: u16,
    security: &'static str,
    user: String,
    default_from: String,
    unhealthy_since: Option<String>,
    last_error: Option<String>,
}

fn security(server: &MailServer) -> &'static str {
    if server.secure {
        "implicit TLS"
    } else if server.require_tls {
        "STARTTLS required"
    } else {
        "STARTTLS when offered"
    }
}

impl From<MailServer> for ServerItem {
    fn from(server: MailServer) -> Self {
        Self {
            id: server.id.to_string(),
            host: server.host.as_str().to_owned(),
            port: server.port,
            security: security(&server),
            user: server.user.clone(),
            default_from: if server.default_from_name.is_empty() {
                server.default_from_email.clone()
            } else {
                format!(
                    "{} <{}>",
                    server.default_from_name, server.default_from_email
                )
            },
            unhealthy_since: server
                .unhealthy
                .as_ref()
                .map(|unhealthy| day_and_minute(unhealthy.since)),
            last_error: server.unhealthy.map(|unhealthy| unhealthy.last_error),
        }
    }
}

/// `GET /console/accounts/{id}/mail-servers`.
pub(super) async fn list(req: HttpRequest, path: web::Path<String>) -> HttpResponse {
    let (services, signed_in, account) = match account_session(&req, &path).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    blocking(move || {
        let member = member(&services, &signed_in, account, "GET", "")?;
        let page = PageRequest {
            start: 0,
            limit: LISTED,
        };
        let servers: Vec<ServerItem> = list_mail_servers(&services, &member, page)?
            .into_iter()
            .map(ServerItem::from)
            .collect();
        Ok(render::page(
            StatusCode::OK,
            "mail_servers.html",
            minijinja::context! {
                current_account => account.to_string(),
                servers => servers,
                ..account_layout(&services, &signed_in, account, "Mail servers", "mail-servers")?
            },
        ))
    })
    .await
    .map_or_else(|error| error_page(&error), HttpResponse::from)
}

#[derive(Debug, Deserialize, Serialize)]
pub(super) struct ServerForm {
    #[serde(default, skip_serializing)]
    csrf: String,
    #[serde(default)]
    host: String,
    #[serde(default = "default_port")]
    port: String,
    /// `implicit`, `required` or `opportunistic`.
    #[serde(default)]
    security: String,
    /// A checkbox: present when ticked.
    #[serde(default)]
    allow_insecure_tls: Option<String>,
    #[serde(default)]
    user: String,
    /// Never shown again: the form asks for it at every save.
    #[serde(default, skip_serializing)]
    password: String,
    #[serde(default)]
    default_from_email: String,
    #[serde(default)]
    default_from_name: String,
}

fn default_port() -> String {
    "587".to_owned()
}

impl Default for ServerForm {
    fn default() -> Self {
        Self {
            csrf: String::new(),
            host: String::new(),
            port: default_port(),
            security: "required".to_owned(),
            allow_insecure_tls: None,
            user: String::new(),
            password: String::new(),
            default_from_email: String::new(),
            default_from_name: String::new(),
        }
    }
}

impl CsrfForm for ServerForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

impl ServerForm {
    fn input(&self) -> Result<MailServerInput, FieldError> {
        let port = self
            .port
            .trim()
            .parse::<i64>()
            .map_err(|_| FieldError::new("port", "must be a number from 1 to 65535"))?;
        Ok(MailServerInput {
            service_type: Field::Value("smtp".to_owned()),
            host: Field::Value(self.host.trim().to_owned()),
            port: Field::Value(port),
            secure: Field::Value(self.security == "implicit"),
            require_tls: Field::Value(self.security == "required"),
            allow_insecure_tls: Field::Value(self.allow_insecure_tls.is_some()),
            user: Field::Value(self.user.clone()),
            password: Field::Value(self.password.clone()),
            default_from_email: Field::Value(self.default_from_email.trim().to_owned()),
            default_from_name: Field::Value(self.default_from_name.clone()),
        })
    }

    fn of(server: &MailServer) -> Self {
        Self {
            csrf: String::new(),
            host: server.host.as_str().to_owned(),
            port: server.port.to_string(),
            security: if server.secure {
                "implicit"
            } else if server.require_tls {
                "required"
            } else {
                "opportunistic"
            }
            .to_owned(),
            allow_insecure_tls: server.allow_insecure_tls.then(|| "1".to_owned()),
            user: server.user.clone(),
            password: String::new(),
            default_from_email: server.default_from_email.clone(),
            default_from_name: server.default_from_name.clone(),
        }
    }
}

/// What the last save's live check said, shown above the form.
#[derive(Debug, Default, Serialize)]
struct CheckOutcome {
    /// The server accepted the settings.
    passed: bool,
    /// Warnings of a passed check (e.g. no AUTH offered).
    warnings: Vec<String>,
    /// The check sent the credentials unencrypted.
    in_clear: bool,
}

/// The mail server form's fields, by the API's names for them (`secure` and `requireTLS`
/// are both its Security choice).
const SERVER_FIELDS: &[FormField] = &[
    FormField {
        api: "host",
        name: "host",
        label: "Host",
    },
    FormField {
        api: "port",
        name: "port",
        label: "Port",
    },
    FormField {
        api: "secure",
        name: "security",
        label: "Security",
    },
    FormField {
        api: "requireTLS",
        name: "security",
        label: "Security",
    },
    FormField {
        api: "allowInsecureTLS",
        name: "allow_insecure_tls",
        label: "Accept certificates that do not verify",
    },
    FormField {
        api: "user",
        name: "user",
        label: "User",
    },
    FormField {
        api: "password",
        name: "password",
        label: "Password",
    },
    FormField {
        api: "defaultFromEmail",
        name: "default_from_email",
        label: "Default sender address",
    },
    FormField {
        api: "defaultFromName",
        name: "default_from_name",
        label: "Default sender name",
    },
];

#[allow(clippy::too_many_arguments)]
fn form_page(
    services: &Services,
    signed_in: &SignedIn,
    account: AccountId,
    server: Option<(MailServerId, Option<ServerItem>)>,
    form: &ServerForm,
    status: StatusCode,
    (errors, live_refusal): (&[FieldError], bool),
    check: Option<CheckOutcome>,
) -> Result<render::Page, AppError> {
    let (heading, action, health) = match server {
        Some((id, health)) => (
            format!("Mail server {}", form.host),
            format!("/console/accounts/{account}/mail-servers/{id}"),
            health,
        ),
        None => (
            "Add a mail server".to_owned(),
            format!("/console/accounts/{account}/mail-servers"),
            None,
        ),
    };
    Ok(render::page(
        status,
        "mail_server_form.html",
        minijinja::context! {
            heading => heading,
            action => action,
            health => health,
            current_account => account.to_string(),
            form => form,
            insecure => form.allow_insecure_tls.is_some(),
            errors => FormErrors::new(errors, SERVER_FIELDS),
            live_refusal => live_refusal,
            check => check,
            ..account_layout(services, signed_in, account, "Mail server", "mail-servers")?
        },
    ))
}

/// `GET /console/accounts/{id}/mail-servers/new`.
pub(super) async fn new_form(req: HttpRequest, path: web::Path<String>) -> HttpResponse {
    let (services, signed_in, account) = match account_session(&req, &path).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    blocking(move || {
        member(&services, &signed_in, account, "POST", "")?;
        form_page(
            &services,
            &signed_in,
            account,
            None,
            &ServerForm::default(),
            StatusCode::OK,
            (&[], false),
            None,
        )
    })
    .await
    .map_or_else(|error| error_page(&error), HttpResponse::from)
}

/// `POST /console/accounts/{id}/mail-servers` (create) and
/// `POST /console/accounts/{id}/mail-servers/{serverId}` (replace every setting): both
/// check the settings against the live server first.
async fn save(
    req: HttpRequest,
    account: &str,
    server: Option<&str>,
    body: web::Bytes,
) -> HttpResponse {
    let (services, signed_in, form) = match signed_in_form::<ServerForm>(&req, &body).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let ids = match server {
        Some(server) => record_ids(account, server, MailServerId::parse)
            .map(|(account, server)| (account, Some(server))),
        None => account_id(account).map(|account| (account, None)),
    };
    let (account, server) = match ids {
        Ok(ids) => ids,
        Err(response) => return response,
    };
    blocking(move || {
        let (method, rest) = match server {
            Some(id) => ("PATCH", format!("/{id}")),
            None => ("POST", String::new()),
        };
        let member = member(&services, &signed_in, account, method, &rest)?;
        // Whether the live server answered the refusal, or Mailroom's own rules did (the
        // fields, the account's sending domains): the page must not blame the server
        // for what was never sent to it.
        let refused = |errors: &[FieldError], live: bool| {
            form_page(
                &services,
                &signed_in,
                account,
                server.map(|id| (id, None)),
                &form,
                StatusCode::BAD_REQUEST,
                (errors, live),
                None,
            )
        };
        let input = match form.input() {
            Ok(input) => input,
            Err(error) => return refused(&[error], false),
        };
        if let Err(errors) = input.clone().parse() {
            return refused(&errors.0, false);
        }
        let saved = match server {
            Some(id) => update_mail_server(&services, &member, id, input),
            None => create_mail_server(&services, &member, input),
        };
        match saved {
            Ok(saved) => form_page(
                &services,
                &signed_in,
                account,
                Some((
                    saved.server.id,
                    Some(ServerItem::from(saved.server.clone())),
                )),
                &ServerForm::of(&saved.server),
                StatusCode::OK,
                (&[], false),
                Some(CheckOutcome {
                    passed: true,
                    warnings: saved.warnings,
                    in_clear: saved.credentials_sent_in_clear,
                }),
            ),
            Err(AppError::Invalid(errors)) => {
                let live = errors
                    .0
                    .iter()
                    .all(|error| error.field != "defaultFromEmail");
                refused(&errors.0, live)
            }
            Err(other) => Err(other),
        }
    })
    .await
    .map_or_else(|error| error_page(&error), HttpResponse::from)
}

/// `POST /console/accounts/{id}/mail-servers`.
pub(super) async fn create(
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Bytes,
) -> HttpResponse {
    save(req, &path, None, body).await
}

/// `POST /console/accounts/{id}/mail-servers/{serverId}`.
pub(super) async fn update(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> HttpResponse {
    save(req, &path.0, Some(&path.1), body).await
}

/// `GET /console/accounts/{id}/mail-servers/{serverId}`: its health and the edit form.
pub(super) async fn edit_form(req: HttpRequest, path: web::Path<(String, String)>) -> HttpResponse {
    let (services, signed_in) = match require_session(&req).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let (account, server) = match record_ids(&path.0, &path.1, MailServerId::parse) {
        Ok(ids) => ids,
        Err(response) => return response,
    };
    blocking(move || {
        let member = member(&services, &signed_in, account, "GET", &format!("/{server}"))?;
        let found = get_mail_server(&services, &member, server)?;
        form_page(
            &services,
            &signed_in,
            account,
            Some((server, Some(ServerItem::from(found.clone())))),
            &ServerForm::of(&found),
            StatusCode::OK,
            (&[], false),
            None,
        )
    })
    .await
    .map_or_else(|error| error_page(&error), HttpResponse::from)
}
