//! The review step of the console's announcement flow (form → review → send): what a
//! draft would send, to how many contacts, and the mail as the first of them receives it;
//! a test send; warnings about what recipients miss; and the one button that sends. A
//! draft is not stored: the review page carries its fields, and each of its buttons posts
//! them again (`announcement_pages::create`).

use actix_web::http::StatusCode;
use mailroom_app::{
    announcements::{review_announcement, AnnouncementReview},
    auth::Member,
    console::SignedIn,
    templates::{fill_text_part, preview_template, test_send, PreviewRequest},
    topics::get_topic,
    AppError, Services,
};
use mailroom_domain::{email::EmailAddress, AccountId};
use serde::Serialize;

use super::{
    announcement_pages::{form_page, AnnouncementForm},
    contact_pages::condition_words,
    page_kit::{account_page, unless_gone},
    render,
    segment_pages::audience_link,
};

/// What a step of the flow works for: the account's member, in the session.
pub(super) struct Step<'a> {
    pub(super) services: &'a Services,
    pub(super) member: &'a Member,
    pub(super) signed_in: &'a SignedIn,
    pub(super) account: AccountId,
}

/// The mail as the audience's first contact receives it (rendered now, in the render
/// sandbox), or why it does not render.
#[derive(Debug, Default, Serialize)]
struct SamplePreview {
    email: String,
    subject: Option<String>,
    text: Option<String>,
    frame: String,
    error: Option<String>,
}

/// What a button of the review did, to say on the page.
#[derive(Debug, Default, Serialize)]
struct Outcome {
    notice: Option<String>,
    test_message: Option<String>,
    test_error: Option<String>,
    text_error: Option<String>,
}

/// The review of `form`, after the button `action` asked for (`test`, `text`, or none).
/// A draft that does not pass the create's checks goes back to the form with its errors.
///
/// # Errors
/// [`AppError`] when the store or the renderer fails.
pub(super) fn review_page(
    step: &Step<'_>,
    form: &AnnouncementForm,
    action: Option<&str>,
) -> Result<render::Page, AppError> {
    let Step {
        services,
        member,
        signed_in,
        account,
    } = *step;
    let mut review = match review_announcement(services, member, form.input()) {
        Ok(review) => review,
        Err(AppError::Invalid(errors)) => {
            return form_page(
                services,
                member,
                signed_in,
                account,
                form,
                StatusCode::BAD_REQUEST,
                &errors.0,
            )
        }
        Err(other) => return Err(other),
    };
    let outcome = act(step, form, action, &mut review)?;
    let sample = sample_preview(step, &review)?;
    let template = &review.template;
    let mut warnings = Vec::new();
    if !["unsubscribe_url", "preferences_url"]
        .iter()
        .any(|link| template.content.contains(link))
    {
        warnings.push(format!(
            "The mail's HTML has no unsubscribe link: {} recipients would have only their \
             mail program's unsubscribe button, and many mark unwanted mail as spam instead. \
             Add a link to {{{{ unsubscribe_url }}}} to the template.",
            review.audience
        ));
    }
    let no_text = template
        .text_content
        .as_deref()
        .is_none_or(|text| text.trim().is_empty());
    if no_text {
        warnings.push(
            "The template has no text part: mail programs that show text only, and some \
             spam filters, see an HTML-only mail. Write one from the HTML with the button \
             below, or in the template."
                .to_owned(),
        );
    }
    let topic = match review.definition.topic {
        Some(topic) => unless_gone(get_topic(services, member, topic))?.map(|topic| topic.name),
        None => None,
    };
    let conditions: Vec<String> = review
        .definition
        .attributes
        .iter()
        .map(condition_words)
        .collect();
    account_page(
        services,
        signed_in,
        account,
        StatusCode::OK,
        "announcement_review.html",
        ("Review the announcement", "announcements"),
        minijinja::context! {
            form => form,
            carried => form.carried(),
            template => minijinja::context! {
                id => template.id.to_string(),
                name => &template.name,
                slug => template.slug.as_str(),
            },
            segment => review.segment.as_ref().map(|segment| &segment.name),
            save_as_segment => review
                .segment
                .is_none()
                .then(|| audience_link(account, &review.definition)),
            topic => topic,
            include_unsubscribed => review.definition.include_unsubscribed,
            conditions => conditions,
            audience => review.audience,
            send_at => review.send_at.map(super::pages::day_and_minute),
            sample => sample,
            warnings => warnings,
            no_text => no_text,
            outcome => outcome,
        },
    )
}

/// Runs the review button `action`: a test send of the template to the address typed, or
/// the template's text part written from its HTML (then the review shows the template
/// as it is now).
fn act(
    step: &Step<'_>,
    form: &AnnouncementForm,
    action: Option<&str>,
    review: &mut AnnouncementReview,
) -> Result<Outcome, AppError> {
    let mut outcome = Outcome::default();
    match action {
        Some("test") => match EmailAddress::parse(form.test_email.trim()) {
            Ok(email) => {
                let queued = test_send(
                    step.services,
                    step.member,
                    review.template.id,
                    &email,
                    serde_json::Map::new(),
                )?;
                outcome.notice = Some(format!(
                    "A test was queued to {}: it is in the message log, marked as a test.",
                    email.as_str()
                ));
                outcome.test_message = Some(queued.id.to_string());
            }
            Err(_) => outcome.test_error = Some("Is not an email address.".to_owned()),
        },
        Some("text") => match fill_text_part(step.services, step.member, review.template.id) {
            Ok(template) => {
                review.template = template;
                outcome.notice = Some(
                    "The template's text part was written from its HTML: every mail it \
                     sends from now carries it."
                        .to_owned(),
                );
            }
            Err(AppError::Invalid(errors)) => outcome.text_error = Some(errors.to_string()),
            Err(other) => return Err(other),
        },
        _ => {}
    }
    Ok(outcome)
}

/// The mail rendered for the audience's first contact; `None` values for an empty
/// audience.
fn sample_preview(
    step: &Step<'_>,
    review: &AnnouncementReview,
) -> Result<Option<SamplePreview>, AppError> {
    let Some(contact) = &review.sample else {
        return Ok(None);
    };
    let template = review.template.id;
    let frame = format!(
        "/console/accounts/{}/templates/{template}/preview?{}",
        step.account,
        serde_urlencoded::to_string([("email", contact.email.as_str())]).unwrap_or_default()
    );
    let mut preview = SamplePreview {
        email: contact.email.clone(),
        frame,
        ..SamplePreview::default()
    };
    let request = PreviewRequest {
        email: EmailAddress::parse(&contact.email).ok(),
        data: serde_json::Map::new(),
    };
    match preview_template(step.services, step.member, template, &request) {
        Ok(rendered) => {
            preview.subject = Some(rendered.subject);
            preview.text = rendered.text;
        }
        Err(AppError::Invalid(errors)) => preview.error = Some(errors.to_string()),
        Err(AppError::BadRequest(reason)) => preview.error = Some(reason),
        Err(other) => return Err(other),
    }
    Ok(Some(preview))
}
