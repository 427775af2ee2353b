//! The console's announcement pages: the list, a form that creates and starts one, and
//! its page, whose progress (audience size and the counters of migration 25) refreshes in
//! place every two seconds while it runs. Everything goes through the announcement use
//! cases the API uses.

use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use mailroom_app::{
    announcements::{
        control_announcement, count_announcements, create_announcement, get_announcement,
        get_announcement_progress, list_announcements,
    },
    auth::{verify_membership, Member, RouteCall},
    console::SignedIn,
    templates::get_template,
    topics::get_topic,
    AppError, Services,
};
use mailroom_domain::{
    announcement::{
        Announcement, AnnouncementControl, AnnouncementCounters, AnnouncementInput,
        AnnouncementStatus,
    },
    paging::PageRequest,
    AccountId, AnnouncementId, FieldError,
};
use serde::{Deserialize, Serialize};

use super::{
    announcement_review::{review_page, Step},
    blocking,
    contact_pages::{condition_words, operator_offer, suggested_attributes, ConditionRow},
    error_page,
    page_kit::{
        account_id, account_layout, confirmation_page, is_confirmed, record_ids, segment_choices,
        template_choices, topic_choices, unless_gone, Confirmation, FormErrors, FormField, Pairs,
    },
    pages::{day_and_minute, require_session, see_other, signed_in_form, CsrfForm},
    render,
};

/// How many announcements, templates and topics the pages list; the API pages further.
const LISTED: u32 = 100;

fn member(
    services: &Services,
    signed_in: &SignedIn,
    account: AccountId,
    method: &str,
    rest: &str,
) -> Result<Member, AppError> {
    // The same proof, for the same call, as the API route the page stands for.
    let path = format!("/v2/accounts/{account}/announcements{rest}");
    let call = RouteCall {
        method,
        path: &path,
        query: "",
    };
    verify_membership(services, &signed_in.actor, account, call)
}

#[derive(Debug, Serialize)]
struct AnnouncementItem {
    id: String,
    name: String,
    subject: String,
    status: &'static str,
    audience_size: u64,
    created_at: String,
}

impl From<Announcement> for AnnouncementItem {
    fn from(announcement: Announcement) -> Self {
        Self {
            id: announcement.id.to_string(),
            name: announcement.name,
            subject: announcement.subject,
            status: announcement.status.as_str(),
            audience_size: announcement.audience_size,
            created_at: day_and_minute(announcement.created_at),
        }
    }
}

/// `GET /console/accounts/{id}/announcements`.
pub(super) async fn list(req: HttpRequest, path: web::Path<String>) -> HttpResponse {
    let (services, signed_in) = match require_session(&req).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let account = match account_id(&path) {
        Ok(account) => account,
        Err(response) => return response,
    };
    blocking(move || {
        let member = member(&services, &signed_in, account, "GET", "")?;
        let page = PageRequest {
            start: 0,
            limit: LISTED,
        };
        let items: Vec<AnnouncementItem> = list_announcements(&services, &member, page)?
            .into_iter()
            .map(AnnouncementItem::from)
            .collect();
        let more = count_announcements(&services, &member)? > u64::from(LISTED);
        Ok(render::page(
            StatusCode::OK,
            "announcements.html",
            minijinja::context! {
                current_account => account.to_string(),
                announcements => items,
                more => more,
                ..account_layout(&services, &signed_in, account, "Announcements", "announcements")?
            },
        ))
    })
    .await
    .map_or_else(|error| error_page(&error), HttpResponse::from)
}

#[derive(Debug, Default, Deserialize, Serialize)]
pub(super) struct AnnouncementForm {
    #[serde(default, skip_serializing)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    template_id: String,
    #[serde(default)]
    topic_id: String,
    /// A saved segment, which stands for the topic, the checkbox and the rows.
    #[serde(default)]
    segment_id: String,
    /// A checkbox: present (any value) when ticked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    include_unsubscribed: Option<String>,
    /// When to start, in UTC, as a `datetime-local` input sends it (`2026-12-24T09:00`);
    /// empty starts it at the confirmation.
    #[serde(default)]
    send_at: String,
    /// The audience conditions, as the segment builder names them: [`CONDITION_ROWS`]
    /// rows of attribute, operator and value; a row without an attribute is left out.
    #[serde(default)]
    c0_slug: String,
    #[serde(default)]
    c0_operator: String,
    #[serde(default)]
    c0_value: String,
    #[serde(default)]
    c1_slug: String,
    #[serde(default)]
    c1_operator: String,
    #[serde(default)]
    c1_value: String,
    #[serde(default)]
    c2_slug: String,
    #[serde(default)]
    c2_operator: String,
    #[serde(default)]
    c2_value: String,
    /// The review step's address for a test send (not carried between steps).
    #[serde(default, skip_serializing)]
    pub(super) test_email: String,
    /// `yes` from the review step's send button: the only post that creates and starts.
    #[serde(default, skip_serializing)]
    confirmed: Option<String>,
}

/// The announcement form's fields, by the API's names for them.
const ANNOUNCEMENT_FIELDS: &[FormField] = &[
    FormField {
        api: "name",
        name: "name",
        label: "Name",
    },
    FormField {
        api: "templateId",
        name: "template_id",
        label: "Template",
    },
    FormField {
        api: "topicId",
        name: "topic_id",
        label: "Topic",
    },
    FormField {
        api: "segmentId",
        name: "segment_id",
        label: "Saved segment",
    },
    FormField {
        api: "attributes",
        name: "attributes",
        label: "Audience conditions",
    },
    FormField {
        api: "sendAt",
        name: "send_at",
        label: "Start at",
    },
];

/// How many audience condition rows the form offers (the API takes more: docs/console.md).
const CONDITION_ROWS: usize = 3;

impl CsrfForm for AnnouncementForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

impl AnnouncementForm {
    /// The draft as the create use case reads it.
    pub(super) fn input(&self) -> AnnouncementInput {
        let chosen = |value: &str| Some(value.trim().to_owned()).filter(|value| !value.is_empty());
        let send_at = chosen(&self.send_at).map(|local| utc_time(&local));
        let input = match chosen(&self.segment_id) {
            // The segment stands for the audience fields; the form's are left out.
            Some(segment) => AnnouncementInput {
                name: Some(self.name.clone()),
                template_id: chosen(&self.template_id),
                segment_id: Some(segment),
                ..AnnouncementInput::default()
            },
            None => AnnouncementInput {
                name: Some(self.name.clone()),
                template_id: chosen(&self.template_id),
                topic_id: chosen(&self.topic_id),
                include_unsubscribed: Some(self.include_unsubscribed.is_some()),
                attributes: Some(self.rows().iter().filter_map(ConditionRow::input).collect()),
                segment_id: None,
                send_at: None,
            },
        };
        AnnouncementInput { send_at, ..input }
    }

    /// Every field the review step carries, as hidden inputs, so its buttons post the
    /// same draft again.
    pub(super) fn carried(&self) -> Vec<(String, String)> {
        serde_urlencoded::to_string(self)
            .ok()
            .and_then(|query| serde_urlencoded::from_str(&query).ok())
            .unwrap_or_default()
    }

    fn rows(&self) -> [ConditionRow; CONDITION_ROWS] {
        [
            (0, &self.c0_slug, &self.c0_operator, &self.c0_value),
            (1, &self.c1_slug, &self.c1_operator, &self.c1_value),
            (2, &self.c2_slug, &self.c2_operator, &self.c2_value),
        ]
        .map(|(index, slug, operator, value)| ConditionRow::new(index, slug, operator, value))
    }
}

pub(super) fn form_page(
    services: &Services,
    member: &Member,
    signed_in: &SignedIn,
    account: AccountId,
    form: &AnnouncementForm,
    status: StatusCode,
    errors: &[FieldError],
) -> Result<render::Page, AppError> {
    let templates = template_choices(services, member)?;
    let topics = topic_choices(services, member)?;
    let segments = segment_choices(services, member)?;
    let attributes = suggested_attributes(services, member)?;
    Ok(render::page(
        status,
        "announcement_form.html",
        minijinja::context! {
            current_account => account.to_string(),
            form => form,
            include_unsubscribed => form.include_unsubscribed.is_some(),
            rows => form.rows(),
            operators => operator_offer(&attributes),
            templates => templates,
            topics => topics,
            segments => segments,
            errors => FormErrors::new(errors, ANNOUNCEMENT_FIELDS),
            ..account_layout(services, signed_in, account, "New announcement", "announcements")?
        },
    ))
}

/// `GET /console/accounts/{id}/announcements/new`.
pub(super) async fn new_form(req: HttpRequest, path: web::Path<String>) -> HttpResponse {
    let (services, signed_in) = match require_session(&req).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let account = match account_id(&path) {
        Ok(account) => account,
        Err(response) => return response,
    };
    blocking(move || {
        let member = member(&services, &signed_in, account, "POST", "")?;
        form_page(
            &services,
            &member,
            &signed_in,
            account,
            &AnnouncementForm::default(),
            StatusCode::OK,
            &[],
        )
    })
    .await
    .map_or_else(|error| error_page(&error), HttpResponse::from)
}

/// Which button of the draft's review posted it.
#[derive(Debug, Default, Deserialize)]
pub(super) struct DraftAction {
    #[serde(default)]
    action: Option<String>,
}

/// `POST /console/accounts/{id}/announcements`: the announcement flow. The form posts the
/// draft here and gets its review (`announcement_review`); the review's buttons post it
/// again to send a test (`?action=test`), write the template's text part
/// (`?action=text`) or go back to the form (`?action=edit`); only its send button
/// (`confirmed=yes`) creates and starts the announcement, then shows it.
pub(super) async fn create(
    req: HttpRequest,
    path: web::Path<String>,
    query: web::Query<DraftAction>,
    body: web::Bytes,
) -> HttpResponse {
    let (services, signed_in, form) = match signed_in_form::<AnnouncementForm>(&req, &body).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let account = match account_id(&path) {
        Ok(account) => account,
        Err(response) => return response,
    };
    let action = query.into_inner().action;
    let outcome = blocking(move || {
        let member = member(&services, &signed_in, account, "POST", "")?;
        let step = Step {
            services: &services,
            member: &member,
            signed_in: &signed_in,
            account,
        };
        match (action.as_deref(), form.confirmed.as_deref()) {
            (Some("edit"), _) => Ok(Err(form_page(
                &services,
                &member,
                &signed_in,
                account,
                &form,
                StatusCode::OK,
                &[],
            )?)),
            (None, Some("yes")) => match create_announcement(&services, &member, form.input()) {
                Ok(created) => Ok(Ok(created.id)),
                Err(AppError::Invalid(errors)) => Ok(Err(form_page(
                    &services,
                    &member,
                    &signed_in,
                    account,
                    &form,
                    StatusCode::BAD_REQUEST,
                    &errors.0,
                )?)),
                Err(other) => Err(other),
            },
            (action, _) => Ok(Err(review_page(&step, &form, action)?)),
        }
    })
    .await;
    match outcome {
        Ok(Ok(id)) => see_other(&format!("/console/accounts/{account}/announcements/{id}")),
        Ok(Err(page)) => page.into(),
        Err(error) => error_page(&error),
    }
}

#[derive(Debug, Serialize)]
struct Progress {
    id: String,
    status: &'static str,
    running: bool,
    failure_reason: Option<String>,
    process_date: Option<String>,
    audience_size: u64,
    /// Messages with a final state, of the audience queued so far, in percent.
    done_percent: u64,
    counters: Vec<(&'static str, u64)>,
}

fn progress(announcement: &Announcement, counters: AnnouncementCounters) -> Progress {
    let finished = counters.sent + counters.failed + counters.bounced + counters.skipped;
    let done_percent = match announcement.status {
        AnnouncementStatus::Completed => 100,
        _ if announcement.audience_size == 0 => 0,
        _ => (finished * 100 / announcement.audience_size).min(100),
    };
    Progress {
        id: announcement.id.to_string(),
        status: announcement.status.as_str(),
        running: !announcement.status.is_final(),
        failure_reason: announcement.failure_reason.clone(),
        process_date: announcement.process_date.map(day_and_minute),
        audience_size: announcement.audience_size,
        done_percent,
        counters: vec![
            ("Queued", counters.queued + counters.sending),
            ("Sent", counters.sent),
            ("Failed", counters.failed),
            ("Bounced", counters.bounced),
            ("Skipped", counters.skipped),
            ("Opened", counters.opened),
            ("Clicked", counters.clicked),
        ],
    }
}

/// `GET /console/accounts/{id}/announcements/{announcementId}`: settings (by name) and
/// progress.
pub(super) async fn show(req: HttpRequest, path: web::Path<(String, String)>) -> HttpResponse {
    let (services, signed_in) = match require_session(&req).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let (account, id) = match record_ids(&path.0, &path.1, AnnouncementId::parse) {
        Ok(ids) => ids,
        Err(response) => return response,
    };
    blocking(move || {
        let member = member(&services, &signed_in, account, "GET", &format!("/{id}"))?;
        let (announcement, counters) = get_announcement_progress(&services, &member, id)?;
        let template = unless_gone(get_template(&services, &member, announcement.template_id))?
            .map(|template| format!("{} ({})", template.name, template.slug.as_str()));
        let topic = match announcement.topic_id {
            Some(topic) => {
                unless_gone(get_topic(&services, &member, topic))?.map(|topic| topic.name)
            }
            None => None,
        };
        let conditions: Vec<String> = announcement
            .attributes
            .iter()
            .map(condition_words)
            .collect();
        Ok(render::page(
            StatusCode::OK,
            "announcement.html",
            minijinja::context! {
                current_account => account.to_string(),
                announcement => AnnouncementItem::from(announcement.clone()),
                template_id => announcement.template_id.to_string(),
                template => template,
                topic_id => announcement.topic_id.map(|topic| topic.to_string()),
                topic => topic,
                include_unsubscribed => announcement.include_unsubscribed,
                conditions => conditions,
                send_at => announcement.send_at.map(day_and_minute),
                controls => controls(announcement.status),
                progress_html => render::partial(
                    "announcement_progress.html",
                    minijinja::context! {
                        current_account => account.to_string(),
                        progress => progress(&announcement, counters),
                    },
                ),
                ..account_layout(&services, &signed_in, account, "Announcement", "announcements")?
            },
        ))
    })
    .await
    .map_or_else(|error| error_page(&error), HttpResponse::from)
}

/// `GET /console/accounts/{id}/announcements/{announcementId}/progress`: the progress
/// section alone, which the page's htmx swaps in while the announcement runs (its answer
/// stops asking once it is completed or failed).
pub(super) async fn progress_fragment(
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> HttpResponse {
    let (services, signed_in) = match require_session(&req).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let (account, id) = match record_ids(&path.0, &path.1, AnnouncementId::parse) {
        Ok(ids) => ids,
        Err(response) => return response,
    };
    blocking(move || {
        let member = member(&services, &signed_in, account, "GET", &format!("/{id}"))?;
        let (announcement, counters) = get_announcement_progress(&services, &member, id)?;
        Ok(render::fragment(
            StatusCode::OK,
            "announcement_progress.html",
            minijinja::context! {
                current_account => account.to_string(),
                progress => progress(&announcement, counters),
            },
        ))
    })
    .await
    .map_or_else(|error| error_page(&error), HttpResponse::from)
}

/// A `datetime-local` value (`2026-12-24T09:00`, seconds optional) read as UTC, in RFC
/// 3339; anything else is passed on as typed, for the create's check to name.
fn utc_time(local: &str) -> String {
    let has_offset = local.ends_with('Z')
        || local
            .get(19..)
            .is_some_and(|tail| tail.contains(['+', '-']));
    match local.len() {
        16 if !has_offset => format!("{local}:00Z"),
        19 if !has_offset => format!("{local}Z"),
        _ => local.to_owned(),
    }
}

/// The controls an announcement in `status` offers, as (path segment, button label).
fn controls(status: AnnouncementStatus) -> Vec<(&'static str, &'static str)> {
    [
        (AnnouncementControl::Pause, "Pause"),
        (AnnouncementControl::Resume, "Resume"),
        (AnnouncementControl::Cancel, "Cancel the announcement"),
    ]
    .into_iter()
    .filter(|(control, _)| control.apply(status).is_ok())
    .map(|(control, label)| (control.as_str(), label))
    .collect()
}

/// `POST /console/accounts/{id}/announcements/{announcementId}/{pause|resume|cancel}`:
/// the control, then the announcement's page. A cancel asks first.
async fn control_form(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
    control: AnnouncementControl,
) -> HttpResponse {
    let (services, signed_in, form) = match signed_in_form::<Pairs>(&req, &body).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let (account, id) = match record_ids(&path.0, &path.1, AnnouncementId::parse) {
        Ok(ids) => ids,
        Err(response) => return response,
    };
    let confirmed = control != AnnouncementControl::Cancel || is_confirmed(&form);
    let outcome = blocking(move || {
        let member = member(
            &services,
            &signed_in,
            account,
            "POST",
            &format!("/{id}/{}", control.as_str()),
        )?;
        if !confirmed {
            let found = get_announcement(&services, &member, id)?;
            return confirmation_page(
                &services,
                &signed_in,
                account,
                "announcements",
                &Confirmation {
                    title: "Cancel this announcement?".into(),
                    what: found.name,
                    consequence: "Nothing more is sent: every message not yet handed to a \
                                  worker is skipped (reason “cancelled”). Messages already \
                                  sent stay sent. This cannot be undone."
                        .into(),
                    button: "Cancel the announcement".into(),
                    cancel: format!("/console/accounts/{account}/announcements/{id}"),
                },
            )
            .map(Some);
        }
        control_announcement(&services, &member, id, control).map(|_| None)
    })
    .await;
    match outcome {
        Ok(None) => see_other(&format!("/console/accounts/{account}/announcements/{id}")),
        Ok(Some(page)) => page.into(),
        Err(error) => error_page(&error),
    }
}

/// `POST …/announcements/{announcementId}/pause`.
pub(super) async fn pause_form(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> HttpResponse {
    control_form(req, path, body, AnnouncementControl::Pause).await
}

/// `POST …/announcements/{announcementId}/resume`.
pub(super) async fn resume_form(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> HttpResponse {
    control_form(req, path, body, AnnouncementControl::Resume).await
}

/// `POST …/announcements/{announcementId}/cancel`, confirmed first.
pub(super) async fn cancel_form(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> HttpResponse {
    control_form(req, path, body, AnnouncementControl::Cancel).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_time_from_the_form_is_read_as_utc() {
        assert_eq!(utc_time("2026-12-24T09:00"), "2026-12-24T09:00:00Z");
        assert_eq!(utc_time("2026-12-24T09:00:30"), "2026-12-24T09:00:30Z");
        assert_eq!(
            utc_time("2026-12-24T09:00:00+01:00"),
            "2026-12-24T09:00:00+01:00"
        );
        assert_eq!(utc_time("tomorrow"), "tomorrow");
    }

    #[test]
    fn the_progress_renders_and_stops_asking_once_final() {
        let env = render::environment();
        let mut announcement = Announcement {
            id: AnnouncementId::parse("01936c5e-7b2a-7cde-8f00-0123456789ab").expect("id"),
            name: "Launch".into(),
            template_id: mailroom_domain::TemplateId::parse("01936c5e-7b2a-7cde-8f00-0123456789ac")
                .expect("id"),
            subject: "Hi".into(),
            topic_id: None,
            include_unsubscribed: false,
            attributes: Vec::new(),
            segment_id: None,
            status: AnnouncementStatus::Running,
            send_at: None,
            last_sampled_contact_id: None,
            audience_size: 4,
            expanded_at: None,
            process_date: None,
            failure_reason: None,
            created_at: mailroom_domain::Timestamp::from_datetime(time::OffsetDateTime::UNIX_EPOCH),
        };
        let counters = AnnouncementCounters {
            sent: 2,
            skipped: 1,
            queued: 1,
            ..AnnouncementCounters::default()
        };
        let render = |announcement: &Announcement| {
            env.get_template("announcement.html")
                .and_then(|page| {
                    page.render(minijinja::context! {
                        current_account => "a",
                        announcement => AnnouncementItem::from(announcement.clone()),
                        template_id => "t",
                        topic_id => None::<String>,
                        include_unsubscribed => false,
                        conditions => 0,
                        progress_html => render::partial(
                            "announcement_progress.html",
                            minijinja::context! {
                                current_account => "a",
                                progress => progress(announcement, counters),
                            },
                        ),
                    })
                })
                .unwrap_or_else(|error| panic!("{error:#}"))
        };
        let running = render(&announcement);
        assert!(running.contains("hx-trigger=\"every 2s\""), "{running}");
        assert!(running.contains("value=\"75\""), "3 of 4 final: {running}");
        announcement.status = AnnouncementStatus::Completed;
        let done = render(&announcement);
        assert!(!done.contains("hx-get"), "{done}");
        assert!(done.contains("value=\"100\""), "{done}");
    }
}
