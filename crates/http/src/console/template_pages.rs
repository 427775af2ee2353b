//! The console's template pages: list, create, edit, and a preview of the stored HTML in
//! a sandboxed frame. Everything goes through the template use cases the API uses.

use actix_web::{
    http::{header, StatusCode},
    web, HttpRequest, HttpResponse,
};
use mailroom_app::{
    auth::{verify_membership, Member, RouteCall},
    rendering::RenderedMessage,
    templates::{
        count_templates, create_template, get_template, list_templates, preview_draft,
        preview_template, test_send, update_template, PreviewRequest,
    },
    AppError, Services,
};
use mailroom_domain::{
    email::EmailAddress, paging::PageRequest, patch::Field, template::TemplateInput, AccountId,
    FieldError, TemplateId,
};
use serde::{Deserialize, Serialize};

use super::{
    blocking, error_page,
    page_kit::{
        account_form, account_layout, account_session, record_form, record_ids, FormErrors,
        FormField,
    },
    pages::{day_and_minute, require_session, CsrfForm},
    render,
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
    /// `html` or `wysiwyg` (the visual editor); empty keeps the stored one.
    #[serde(default)]
    content_type: String,
}

impl CsrfForm for TemplateForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

impl TemplateForm {
    /// A new template's draft for its preview: the fields a save requires stand in when
    /// they are still empty, since the preview renders only the content and subject.
    fn draft_input(&self) -> TemplateInput {
        let or = |value: &str, stand_in: &str| {
            if value.trim().is_empty() {
                stand_in.to_owned()
            } else {
                value.to_owned()
            }
        };
        TemplateInput {
            name: Field::Value(or(&self.name, "Draft")),
            slug: Field::Value(or(&self.slug, "draft")),
            subject: Field::Value(or(&self.subject, "(no subject yet)")),
            ..self.input()
        }
    }

    fn input(&self) -> TemplateInput {
        TemplateInput {
            name: Field::Value(self.name.clone()),
            slug: Field::Value(self.slug.clone()),
            subject: Field::Value(self.subject.clone()),
            content: Field::Value(self.content.clone()),
            content_type: if self.content_type.is_empty() {
                Field::Absent
            } else {
                Field::Value(self.content_type.clone())
            },
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

#[derive(Debug, Serialize)]
struct TemplateItem {
    id: String,
    name: String,
    slug: String,
    subject: String,
    content_type: &'static str,
    updated_at: String,
}

/// `GET /console/accounts/{id}/templates`.
pub(super) async fn list(req: HttpRequest, path: web::Path<String>) -> HttpResponse {
    let (services, signed_in, account) = match account_session(&req, &path).await {
        Ok(found) => found,
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
                ..account_layout(&services, &signed_in, account, "Templates", "templates")?
            },
        ))
    })
    .await
    .map_or_else(|error| error_page(&error), HttpResponse::from)
}

#[allow(clippy::too_many_arguments)]
fn form_page(
    services: &Services,
    signed_in: &SignedIn,
    account: AccountId,
    template: Option<TemplateId>,
    form: &TemplateForm,
    status: StatusCode,
    errors: &[FieldError],
    saved: bool,
) -> Result<render::Page, AppError> {
    form_page_with(
        services,
        signed_in,
        account,
        template,
        form,
        status,
        errors,
        saved,
        &SampleView::default(),
    )
}

/// The sample the preview renders with, and what it rendered (the HTML itself loads in
/// the sandboxed frame).
#[derive(Debug, Default, Serialize)]
struct SampleView {
    email: String,
    data: String,
    /// The query string that makes the frame render the same sample.
    query: String,
    subject: Option<String>,
    text: Option<String>,
    error: Option<String>,
    test_sent: Option<String>,
    test_error: Option<String>,
}

/// The template form's fields, by the API's names for them.
const TEMPLATE_FIELDS: &[FormField] = &[
    FormField {
        api: "name",
        name: "name",
        label: "Name",
    },
    FormField {
        api: "slug",
        name: "slug",
        label: "Slug",
    },
    FormField {
        api: "subject",
        name: "subject",
        label: "Subject",
    },
    FormField {
        api: "contentType",
        name: "content_type",
        label: "Editor",
    },
    FormField {
        api: "content",
        name: "content",
        label: "HTML content",
    },
];

#[allow(clippy::too_many_arguments)]
fn form_page_with(
    services: &Services,
    signed_in: &SignedIn,
    account: AccountId,
    template: Option<TemplateId>,
    form: &TemplateForm,
    status: StatusCode,
    errors: &[FieldError],
    saved: bool,
    sample: &SampleView,
) -> Result<render::Page, AppError> {
    let (heading, action, preview_src) = match template {
        Some(id) => (
            format!("Template “{}”", form.name),
            format!("/console/accounts/{account}/templates/{id}"),
            Some(format!(
                "/console/accounts/{account}/templates/{id}/preview{}",
                sample.query
            )),
        ),
        None => (
            "Create a template".to_owned(),
            format!("/console/accounts/{account}/templates"),
            None,
        ),
    };
    let draft_preview = match template {
        Some(id) => format!("/console/accounts/{account}/templates/{id}/preview"),
        None => format!("/console/accounts/{account}/templates/new/preview"),
    };
    Ok(render::page(
        status,
        "template_form.html",
        minijinja::context! {
            heading => heading,
            action => action,
            preview_src => preview_src,
            draft_preview => draft_preview,
            current_account => account.to_string(),
            form => form,
            errors => FormErrors::new(errors, TEMPLATE_FIELDS),
            saved => saved,
            sample => sample,
            ..account_layout(services, signed_in, account, "Template", "templates")?
        },
    ))
}

/// `GET /console/accounts/{id}/templates/new`.
pub(super) async fn new_form(req: HttpRequest, path: web::Path<String>) -> HttpResponse {
    let (services, signed_in, account) = match account_session(&req, &path).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    blocking(move || {
        member(&services, &signed_in, account, "POST", "")?;
        let form = TemplateForm::default();
        form_page(
            &services,
            &signed_in,
            account,
            None,
            &form,
            StatusCode::OK,
            &[],
            false,
        )
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
    let (services, signed_in, form, account) =
        match account_form::<TemplateForm>(&req, &body, &path).await {
            Ok(found) => found,
            Err(response) => return response,
        };
    let outcome = blocking(move || {
        let member = member(&services, &signed_in, account, "POST", "")?;
        match create_template(&services, &member, form.input()) {
            Ok(template) => Ok(Ok(template.id)),
            Err(AppError::Invalid(errors)) => Ok(Err(form_page(
                &services,
                &signed_in,
                account,
                None,
                &form,
                StatusCode::BAD_REQUEST,
                &errors.0,
                false,
            )?)),
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

#[derive(Debug, Default, Deserialize)]
pub(super) struct SavedQuery {
    #[serde(default)]
    saved: Option<String>,
    /// Preview for this contact's attributes.
    #[serde(default)]
    email: Option<String>,
    /// Preview with these variables: a JSON object.
    #[serde(default)]
    data: Option<String>,
    /// The id of a test send just queued.
    #[serde(default)]
    sent: Option<String>,
}

/// The largest sample `data` the preview form takes (it travels in the query string).
const MAX_SAMPLE_BYTES: usize = 4 * 1024;

impl SavedQuery {
    /// The preview request the query asks for, or why it cannot be read.
    fn preview_request(&self) -> Result<PreviewRequest, String> {
        let email = match self.email.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(text) => {
                Some(EmailAddress::parse(text).map_err(|error| format!("email: {error}"))?)
            }
        };
        let data = match self.data.as_deref().map(str::trim) {
            None | Some("") => serde_json::Map::new(),
            Some(text) if text.len() > MAX_SAMPLE_BYTES => {
                return Err(format!("data: at most {MAX_SAMPLE_BYTES} bytes"))
            }
            Some(text) => match serde_json::from_str(text) {
                Ok(serde_json::Value::Object(map)) => map,
                _ => {
                    return Err(
                        "data: must be a JSON object, e.g. {\"first_name\": \"Ada\"}".into(),
                    )
                }
            },
        };
        Ok(PreviewRequest { email, data })
    }

    fn sample_query(&self) -> String {
        let pairs: Vec<(&str, &str)> = [("email", &self.email), ("data", &self.data)]
            .into_iter()
            .filter_map(|(key, value)| {
                value
                    .as_deref()
                    .filter(|value| !value.trim().is_empty())
                    .map(|value| (key, value))
            })
            .collect();
        if pairs.is_empty() {
            String::new()
        } else {
            format!(
                "?{}",
                serde_urlencoded::to_string(pairs).unwrap_or_default()
            )
        }
    }
}

/// Renders the sample through the preview use case (the render sandbox in the server):
/// the subject and text for the page, or the error that names the field and line.
fn sample_view(
    services: &Services,
    member: &Member,
    template: TemplateId,
    query: &SavedQuery,
) -> Result<SampleView, AppError> {
    let mut view = SampleView {
        email: query.email.clone().unwrap_or_default(),
        data: query.data.clone().unwrap_or_default(),
        query: query.sample_query(),
        test_sent: query.sent.clone(),
        ..SampleView::default()
    };
    match query.preview_request() {
        Err(error) => view.error = Some(error),
        Ok(request) => match preview_template(services, member, template, &request) {
            Ok(rendered) => {
                view.subject = Some(rendered.subject);
                view.text = rendered.text;
            }
            Err(AppError::Invalid(errors)) => view.error = Some(errors.to_string()),
            Err(AppError::BadRequest(reason)) => view.error = Some(reason),
            Err(other) => return Err(other),
        },
    }
    Ok(view)
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
    let (account, template) = match record_ids(&path.0, &path.1, TemplateId::parse) {
        Ok(ids) => ids,
        Err(response) => return response,
    };
    let saved = query.saved.is_some();
    let query = query.into_inner();
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
            content_type: stored.content_type.as_str().to_owned(),
        };
        let sample = sample_view(&services, &member, template, &query)?;
        form_page_with(
            &services,
            &signed_in,
            account,
            Some(template),
            &form,
            StatusCode::OK,
            &[],
            saved,
            &sample,
        )
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
    let (services, signed_in, form, (account, template)) =
        match record_form::<TemplateForm, _, _>(&req, &body, &path.0, &path.1, TemplateId::parse)
            .await
        {
            Ok(found) => found,
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
                &services,
                &signed_in,
                account,
                Some(template),
                &form,
                StatusCode::BAD_REQUEST,
                &errors.0,
                false,
            )?)),
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
/// for the edit page's frame only ([`sandboxed_html`]).
pub(super) async fn preview(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    query: web::Query<SavedQuery>,
) -> HttpResponse {
    let (services, signed_in) = match require_session(&req).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let (account, template) = match record_ids(&path.0, &path.1, TemplateId::parse) {
        Ok(ids) => ids,
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
        // Rendered with the sample as a send would render it (in the render sandbox);
        // a template that does not render shows why instead, escaped.
        let request = match query.preview_request() {
            Ok(request) => request,
            Err(error) => return Ok(failure_html(&error)),
        };
        preview_html(preview_template(&services, &member, template, &request))
    })
    .await;
    sandboxed_html(content)
}

/// `POST …/templates/new/preview`: a new template's draft, rendered without saving, for
/// the form's preview frame (its target).
pub(super) async fn preview_new_draft(
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Bytes,
) -> HttpResponse {
    let (services, signed_in, form, account) =
        match account_form::<TemplateForm>(&req, &body, &path).await {
            Ok(found) => found,
            Err(response) => return response,
        };
    sandboxed_html(
        blocking(move || {
            let member = member(&services, &signed_in, account, "POST", "")?;
            preview_html(preview_draft(
                &services,
                &member,
                None,
                form.draft_input(),
                &PreviewRequest::default(),
            ))
        })
        .await,
    )
}

/// `POST …/templates/{templateId}/preview`: the stored template with the form's changes,
/// rendered without saving, for the edit page's preview frame (its target).
pub(super) async fn preview_draft_of(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> HttpResponse {
    let (services, signed_in, form, (account, template)) =
        match record_form::<TemplateForm, _, _>(&req, &body, &path.0, &path.1, TemplateId::parse)
            .await
        {
            Ok(found) => found,
            Err(response) => return response,
        };
    sandboxed_html(
        blocking(move || {
            let member = member(
                &services,
                &signed_in,
                account,
                "GET",
                &format!("/{template}"),
            )?;
            preview_html(preview_draft(
                &services,
                &member,
                Some(template),
                form.input(),
                &PreviewRequest::default(),
            ))
        })
        .await,
    )
}

/// The HTML of a preview, or a page that says why the template does not render.
pub(super) fn preview_html(
    rendered: Result<RenderedMessage, AppError>,
) -> Result<String, AppError> {
    match rendered {
        Ok(rendered) => Ok(rendered.html),
        Err(AppError::Invalid(errors)) => Ok(failure_html(&errors.to_string())),
        Err(AppError::BadRequest(reason)) => Ok(failure_html(&reason)),
        Err(other) => Err(other),
    }
}

/// Rendered mail HTML for a console frame only: its own policy makes it a sandbox (no
/// scripts, no forms, an origin of its own) that may be framed by the console alone;
/// images and inline styles load as a mail client would load them.
pub(super) fn sandboxed_html(content: Result<String, AppError>) -> HttpResponse {
    match content {
        Ok(content) => HttpResponse::Ok()
            .content_type("text/html; charset=utf-8")
            .insert_header((header::CACHE_CONTROL, "no-store"))
            .insert_header((
                header::CONTENT_SECURITY_POLICY,
                // No remote loads: an image on another server would tell its owner when
                // (and from where) a member opened the preview.
                "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'; \
                 frame-ancestors 'self'",
            ))
            .insert_header((header::REFERRER_POLICY, "no-referrer"))
            .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
            .body(content),
        Err(error) => error_page(&error),
    }
}

fn failure_html(reason: &str) -> String {
    let escaped = reason
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    format!("<!doctype html><html lang=\"en\"><title>Preview</title><p>No preview: {escaped}</p></html>")
}

#[derive(Debug, Deserialize)]
pub(super) struct TestSendForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    email: String,
}

impl CsrfForm for TestSendForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

/// `POST /console/accounts/{id}/templates/{templateId}/test-send`: queues one test send
/// (the API's test send), then shows the template with the message's id.
pub(super) async fn send_test(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> HttpResponse {
    let (services, signed_in, form, (account, template)) =
        match record_form::<TestSendForm, _, _>(&req, &body, &path.0, &path.1, TemplateId::parse)
            .await
        {
            Ok(found) => found,
            Err(response) => return response,
        };
    let outcome = blocking(move || {
        let member = member(
            &services,
            &signed_in,
            account,
            "POST",
            &format!("/{template}/test-send"),
        )?;
        let email = match EmailAddress::parse(form.email.trim()) {
            Ok(email) => email,
            Err(error) => {
                let stored = get_template(&services, &member, template)?;
                let view = SampleView {
                    test_error: Some(format!("email: {error}")),
                    ..SampleView::default()
                };
                let form = TemplateForm {
                    csrf: String::new(),
                    name: stored.name,
                    slug: stored.slug.as_str().to_owned(),
                    subject: stored.subject,
                    content: stored.content,
                    content_type: stored.content_type.as_str().to_owned(),
                };
                return Ok(Err(form_page_with(
                    &services,
                    &signed_in,
                    account,
                    Some(template),
                    &form,
                    StatusCode::BAD_REQUEST,
                    &[],
                    false,
                    &view,
                )?));
            }
        };
        let queued = test_send(&services, &member, template, &email, serde_json::Map::new())?;
        Ok(Ok(queued.id))
    })
    .await;
    match outcome {
        Ok(Ok(id)) => super::pages::see_other(&format!(
            "/console/accounts/{account}/templates/{template}?sent={id}"
        )),
        Ok(Err(page)) => page.into(),
        Err(error) => error_page(&error),
    }
}
