//! The console's template pages: list, create, edit, and a preview of the stored HTML in
//! a sandboxed frame. Everything goes through the template use cases the API uses.

use actix_web::{
    http::{header, StatusCode},
    web, HttpRequest, HttpResponse,
};
use mailroom_app::{
    auth::{verify_membership, Member, RouteCall},
    templates::{count_templates, create_template, get_template, list_templates, update_template},
    AppError, Services,
};
use mailroom_domain::{
    paging::PageRequest, patch::Field, template::TemplateInput, AccountId, FieldError, TemplateId,
};
use serde::{Deserialize, Serialize};

use super::{
    blocking, error_page,
    pages::{day_and_minute, require_session, signed_in_form, CsrfForm},
    render, Layout,
};
use mailroom_app::console::SignedIn;

/// How many templates the list shows; the API pages through the rest.
const LISTED: u32 = 100;

#[derive(Debug, Default, Deserialize, Serialize)]
pub(super) struct TemplateForm {
    #[serde(default, skip_serializing)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    slug: String,
    #[serde(default)]
    subject: String,
    #[serde(default)]
    content: String,
}

impl CsrfForm for TemplateForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

impl TemplateForm {
    fn input(&self) -> TemplateInput {
        TemplateInput {
            name: Field::Value(self.name.clone()),
            slug: Field::Value(self.slug.clone()),
            subject: Field::Value(self.subject.clone()),
            content: Field::Value(self.content.clone()),
            ..TemplateInput::default()
        }
    }
}

fn member(
    services: &Services,
    signed_in: &SignedIn,
    account: AccountId,
    method: &str,
    rest: &str,
) -> Result<Member, AppError> {
    // The same proof, for the same call, as the API route the page stands for.
    let path = format!("/v2/accounts/{account}/templates{rest}");
    let call = RouteCall {
        method,
        path: &path,
        query: "",
    };
    verify_membership(services, &signed_in.actor, account, call)
}

fn parse_ids(
    account: &str,
    template: Option<&str>,
) -> Result<(AccountId, Option<TemplateId>), HttpResponse> {
    let account = AccountId::parse(account).map_err(|_| error_page(&AppError::NotFound))?;
    let template = template
        .map(|id| TemplateId::parse(id).map_err(|_| error_page(&AppError::NotFound)))
        .transpose()?;
    Ok((account, template))
}

#[derive(Debug, Serialize)]
struct TemplateItem {
    id: String,
    name: String,
    slug: String,
    subject: String,
    content_type: &'static str,
    updated_at: String,
}

fn layout<'a>(signed_in: &'a SignedIn, title: &'a str) -> minijinja::Value {
    minijinja::Value::from_serialize(Layout {
        title,
        signed_in: true,
        csrf: &signed_in.session.csrf_token,
        section: "accounts",
    })
}

/// `GET /console/accounts/{id}/templates`.
pub(super) async fn list(req: HttpRequest, path: web::Path<String>) -> HttpResponse {
    let (services, signed_in) = match require_session(&req).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let (account, _) = match parse_ids(&path, None) {
        Ok(ids) => ids,
        Err(response) => return response,
    };
    blocking(move || {
        let member = member(&services, &signed_in, account, "GET", "")?;
        let templates: Vec<TemplateItem> = list_templates(
            &services,
            &member,
            PageRequest {
                start: 0,
                limit: LISTED,
            },
        )?
        .into_iter()
        .map(|template| TemplateItem {
            id: template.id.to_string(),
            name: template.name,
            slug: template.slug.as_str().to_owned(),
            subject: template.subject,
            content_type: template.content_type.as_str(),
            updated_at: day_and_minute(template.updated_at),
        })
        .collect();
        let more = count_templates(&services, &member)? > u64::from(LISTED);
        Ok(render::page(
            StatusCode::OK,
            "templates.html",
            minijinja::context! {
                current_account => account.to_string(),
                templates => templates,
                more => more,
                ..layout(&signed_in, "Templates")
            },
        ))
    })
    .await
    .map_or_else(|error| error_page(&error), HttpResponse::from)
}

fn form_page(
    signed_in: &SignedIn,
    account: AccountId,
    template: Option<TemplateId>,
    form: &TemplateForm,
    status: StatusCode,
    errors: &[FieldError],
    saved: bool,
) -> render::Page {
    let (heading, action, preview_src) = match template {
        Some(id) => (
            format!("Template “{}”", form.name),
            format!("/console/accounts/{account}/templates/{id}"),
            Some(format!(
                "/console/accounts/{account}/templates/{id}/preview"
            )),
        ),
        None => (
            "Create a template".to_owned(),
            format!("/console/accounts/{account}/templates"),
            None,
        ),
    };
    render::page(
        status,
        "template_form.html",
        minijinja::context! {
            heading => heading,
            action => action,
            preview_src => preview_src,
            current_account => account.to_string(),
            form => form,
            errors => errors,
            saved => saved,
            ..layout(signed_in, "Template")
        },
    )
}

/// `GET /console/accounts/{id}/templates/new`.
pub(super) async fn new_form(req: HttpRequest, path: web::Path<String>) -> HttpResponse {
    let (services, signed_in) = match require_session(&req).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let (account, _) = match parse_ids(&path, None) {
        Ok(ids) => ids,
        Err(response) => return response,
    };
    blocking(move || {
        member(&services, &signed_in, account, "POST", "")?;
        let form = TemplateForm::default();
        Ok(form_page(
            &signed_in,
            account,
            None,
            &form,
            StatusCode::OK,
            &[],
            false,
        ))
    })
    .await
    .map_or_else(|error| error_page(&error), HttpResponse::from)
}

/// `POST /console/accounts/{id}/templates`: creates a template, then shows it.
pub(super) async fn create(
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Bytes,
) -> HttpResponse {
    let (services, signed_in, form) = match signed_in_form::<TemplateForm>(&req, &body).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let (account, _) = match parse_ids(&path, None) {
        Ok(ids) => ids,
        Err(response) => return response,
    };
    let outcome = blocking(move || {
        let member = member(&services, &signed_in, account, "POST", "")?;
        match create_template(&services, &member, form.input()) {
            Ok(template) => Ok(Ok(template.id)),
            Err(AppError::Invalid(errors)) => Ok(Err(form_page(
                &signed_in,
                account,
                None,
                &form,
                StatusCode::BAD_REQUEST,
                &errors.0,
                false,
            ))),
            Err(other) => Err(other),
        }
    })
    .await;
    match outcome {
        Ok(Ok(id)) => super::pages::see_other(&format!(
            "/console/accounts/{account}/templates/{id}?saved=1"
        )),
        Ok(Err(page)) => page.into(),
        Err(error) => error_page(&error),
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct SavedQuery {
    #[serde(default)]
    saved: Option<String>,
}

/// `GET /console/accounts/{id}/templates/{templateId}`: the edit form and the preview.
pub(super) async fn edit_form(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    query: web::Query<SavedQuery>,
) -> HttpResponse {
    let (services, signed_in) = match require_session(&req).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let (account, template) = match parse_ids(&path.0, Some(&path.1)) {
        Ok((account, Some(template))) => (account, template),
        Ok(_) => return error_page(&AppError::NotFound),
        Err(response) => return response,
    };
    let saved = query.saved.is_some();
    blocking(move || {
        let member = member(
            &services,
            &signed_in,
            account,
            "GET",
            &format!("/{template}"),
        )?;
        let stored = get_template(&services, &member, template)?;
        let form = TemplateForm {
            csrf: String::new(),
            name: stored.name,
            slug: stored.slug.as_str().to_owned(),
            subject: stored.subject,
            content: stored.content,
        };
        Ok(form_page(
            &signed_in,
            account,
            Some(template),
            &form,
            StatusCode::OK,
            &[],
            saved,
        ))
    })
    .await
    .map_or_else(|error| error_page(&error), HttpResponse::from)
}

/// `POST /console/accounts/{id}/templates/{templateId}`: saves the edit.
pub(super) async fn update(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> HttpResponse {
    let (services, signed_in, form) = match signed_in_form::<TemplateForm>(&req, &body).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let (account, template) = match parse_ids(&path.0, Some(&path.1)) {
        Ok((account, Some(template))) => (account, template),
        Ok(_) => return error_page(&AppError::NotFound),
        Err(response) => return response,
    };
    let outcome = blocking(move || {
        let member = member(
            &services,
            &signed_in,
            account,
            "PATCH",
            &format!("/{template}"),
        )?;
        match update_template(&services, &member, template, form.input()) {
            Ok(_) => Ok(None),
            Err(AppError::Invalid(errors)) => Ok(Some(form_page(
                &signed_in,
                account,
                Some(template),
                &form,
                StatusCode::BAD_REQUEST,
                &errors.0,
                false,
            ))),
            Err(other) => Err(other),
        }
    })
    .await;
    match outcome {
        Ok(None) => super::pages::see_other(&format!(
            "/console/accounts/{account}/templates/{template}?saved=1"
        )),
        Ok(Some(page)) => page.into(),
        Err(error) => error_page(&error),
    }
}

/// `GET /console/accounts/{id}/templates/{templateId}/preview`: the stored HTML as is,
/// for the edit page's frame only. Its own policy makes it a sandbox (no scripts, no
/// forms, an origin of its own) that may be framed by the console alone; images and
/// inline styles load as a mail client would load them.
pub(super) async fn preview(req: HttpRequest, path: web::Path<(String, String)>) -> HttpResponse {
    let (services, signed_in) = match require_session(&req).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let (account, template) = match parse_ids(&path.0, Some(&path.1)) {
        Ok((account, Some(template))) => (account, template),
        Ok(_) => return error_page(&AppError::NotFound),
        Err(response) => return response,
    };
    let content = blocking(move || {
        let member = member(
            &services,
            &signed_in,
            account,
            "GET",
            &format!("/{template}"),
        )?;
        Ok(get_template(&services, &member, template)?.content)
    })
    .await;
    match content {
        Ok(content) => HttpResponse::Ok()
            .content_type("text/html; charset=utf-8")
            .insert_header((header::CACHE_CONTROL, "no-store"))
            .insert_header((
                header::CONTENT_SECURITY_POLICY,
                "sandbox; default-src 'none'; img-src https: data:; style-src 'unsafe-inline'; \
                 frame-ancestors 'self'",
            ))
            .insert_header((header::REFERRER_POLICY, "no-referrer"))
            .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
            .body(content),
        Err(error) => error_page(&error),
    }
}
