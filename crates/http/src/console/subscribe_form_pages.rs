//! The account's subscribe forms, listed over the use case of `GET …/forms`, each with a
//! link to its hosted page. Forms are made and changed through the API.

use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use mailroom_app::{console::SignedIn, forms::list_forms, topics::list_topics, AppError, Services};
use mailroom_domain::{form::form_key, paging::PageRequest, AccountId};
use serde::Serialize;

use super::{
    blocking,
    page_kit::{account_page, account_session, member, respond},
    pages::day_and_minute,
    render,
};

/// Forms listed: every form an account may hold.
const LISTED: PageRequest = PageRequest {
    start: 0,
    limit: 50,
};

#[derive(Debug, Serialize)]
struct FormRow {
    name: String,
    double_opt_in: bool,
    topics: Vec<String>,
    attributes: Vec<String>,
    page: String,
    created_at: String,
}

fn forms_page(
    services: &Services,
    signed_in: &SignedIn,
    account: AccountId,
) -> Result<render::Page, AppError> {
    let member = member(services, signed_in, account, "GET", "/forms")?;
    let topics = list_topics(
        services,
        &member,
        PageRequest {
            start: 0,
            limit: 100,
        },
    )?;
    let forms: Vec<FormRow> = list_forms(services, &member, LISTED)?
        .into_iter()
        .map(|form| FormRow {
            page: format!("/f/{}", form_key(account, form.id)),
            topics: form
                .settings
                .topic_ids
                .iter()
                .filter_map(|id| topics.iter().find(|topic| topic.id == *id))
                .map(|topic| topic.name.clone())
                .collect(),
            name: form.settings.name,
            double_opt_in: form.settings.double_opt_in,
            attributes: form.settings.attributes,
            created_at: day_and_minute(form.created_at),
        })
        .collect();
    account_page(
        services,
        signed_in,
        account,
        StatusCode::OK,
        "forms.html",
        ("Subscribe forms", "forms"),
        minijinja::context! { forms => forms },
    )
}

/// `GET /console/accounts/{id}/forms`: the account's subscribe forms.
pub(super) async fn forms(req: HttpRequest, path: web::Path<String>) -> HttpResponse {
    let (services, signed_in, account) = match account_session(&req, &path).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    respond(blocking(move || forms_page(&services, &signed_in, account)).await)
}
