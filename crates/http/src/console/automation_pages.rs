//! Topics and automations: list, create, edit and delete, over the use cases of
//! `…/topics` and `…/automations`. Forms that fail come back with their fields filled
//! and the errors listed.

use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use mailroom_app::{
    automations::{
        create_automation, delete_automation, get_automation, list_automations, update_automation,
    },
    console::SignedIn,
    topics::{create_topic, delete_topic, get_topic, list_topics, update_topic},
    AppError, Services,
};
use mailroom_domain::{
    automation::{Automation, AutomationInput},
    paging::PageRequest,
    patch::Field,
    topic::TopicInput,
    AccountId, AutomationId, FieldError, TopicId,
};
use serde::{Deserialize, Serialize};

use super::{
    blocking, error_page,
    page_kit::{
        account_form, account_page, account_session, confirmation_page, done_page, is_confirmed,
        member, record_form, record_ids, respond, template_choices, Confirmation, FormErrors,
        FormField, Pairs,
    },
    pages::{day_and_minute, require_session, see_other, signed_in_form},
    render,
};

/// Topics, automations and templates listed (the API pages through the rest).
const LISTED: u32 = 100;

const FIRST: PageRequest = PageRequest {
    start: 0,
    limit: LISTED,
};

/// The topic forms' fields, by the API's names for them.
const TOPIC_FIELDS: &[FormField] = &[
    FormField {
        api: "name",
        name: "name",
        label: "Name",
    },
    FormField {
        api: "description",
        name: "description",
        label: "Description",
    },
];

/// The automation form's fields, by the API's names for them.
const AUTOMATION_FIELDS: &[FormField] = &[
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
        api: "triggerEventSlug",
        name: "trigger_event_slug",
        label: "Trigger event",
    },
    FormField {
        api: "triggerEventCondition",
        name: "trigger_event_condition",
        label: "Fires",
    },
    FormField {
        api: "timingCondition",
        name: "timing_condition",
        label: "When",
    },
    FormField {
        api: "timingValue",
        name: "timing_value",
        label: "Days later",
    },
    FormField {
        api: "isEnabled",
        name: "is_enabled",
        label: "Enabled",
    },
];

#[derive(Debug, Deserialize)]
pub(super) struct SavedQuery {
    #[serde(default)]
    saved: Option<String>,
}

// ---- Topics ----

#[derive(Debug, Default, Serialize)]
struct TopicForm {
    name: String,
    description: String,
}

impl TopicForm {
    fn read(pairs: &Pairs) -> Self {
        Self {
            name: pairs.get("name").unwrap_or("").to_owned(),
            description: pairs.get("description").unwrap_or("").to_owned(),
        }
    }

    fn input(&self) -> TopicInput {
        TopicInput {
            name: Field::Value(self.name.clone()),
            description: if self.description.trim().is_empty() {
                Field::Null
            } else {
                Field::Value(self.description.clone())
            },
        }
    }
}

#[derive(Debug, Serialize)]
struct TopicRow {
    id: String,
    name: String,
    description: Option<String>,
    created_at: String,
}

fn topics_page(
    services: &Services,
    signed_in: &SignedIn,
    account: AccountId,
    status: StatusCode,
    form: &TopicForm,
    errors: &[FieldError],
    saved: bool,
) -> Result<render::Page, AppError> {
    let member = member(services, signed_in, account, "GET", "/topics")?;
    let topics: Vec<TopicRow> = list_topics(services, &member, FIRST)?
        .into_iter()
        .map(|topic| TopicRow {
            id: topic.id.to_string(),
            name: topic.name,
            description: topic.description,
            created_at: day_and_minute(topic.created_at),
        })
        .collect();
    account_page(
        services,
        signed_in,
        account,
        status,
        "topics.html",
        ("Topics", "topics"),
        minijinja::context! {
            topics => topics, form => form, errors => FormErrors::new(errors, TOPIC_FIELDS),
            saved => saved,
            listed => LISTED,
        },
    )
}

/// `GET /console/accounts/{id}/topics`: the topics and a form to create one.
pub(super) async fn topics(
    req: HttpRequest,
    path: web::Path<String>,
    query: web::Query<SavedQuery>,
) -> HttpResponse {
    let (services, signed_in, account) = match account_session(&req, &path).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let saved = query.saved.is_some();
    respond(
        blocking(move || {
            topics_page(
                &services,
                &signed_in,
                account,
                StatusCode::OK,
                &TopicForm::default(),
                &[],
                saved,
            )
        })
        .await,
    )
}

/// `POST /console/accounts/{id}/topics`.
pub(super) async fn create_topic_form(
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Bytes,
) -> HttpResponse {
    let (services, signed_in, pairs, account) =
        match account_form::<Pairs>(&req, &body, &path).await {
            Ok(found) => found,
            Err(response) => return response,
        };
    let outcome = blocking(move || {
        let member = member(&services, &signed_in, account, "POST", "/topics")?;
        let form = TopicForm::read(&pairs);
        match create_topic(&services, &member, form.input()) {
            Ok(_) => Ok(None),
            Err(AppError::Invalid(errors)) => Ok(Some(topics_page(
                &services,
                &signed_in,
                account,
                StatusCode::BAD_REQUEST,
                &form,
                &errors.0,
                false,
            )?)),
            Err(other) => Err(other),
        }
    })
    .await;
    match outcome {
        Ok(None) => see_other(&format!("/console/accounts/{account}/topics?saved=1")),
        Ok(Some(page)) => page.into(),
        Err(error) => error_page(&error),
    }
}

fn topic_page(
    services: &Services,
    signed_in: &SignedIn,
    (account, topic): (AccountId, TopicId),
    status: StatusCode,
    form: &TopicForm,
    errors: &[FieldError],
) -> Result<render::Page, AppError> {
    account_page(
        services,
        signed_in,
        account,
        status,
        "topic.html",
        ("Topic", "topics"),
        minijinja::context! {
            topic_id => topic.to_string(), form => form,
            errors => FormErrors::new(errors, TOPIC_FIELDS),
        },
    )
}

/// `GET /console/accounts/{id}/topics/{topicId}`: the edit form.
pub(super) async fn topic(req: HttpRequest, path: web::Path<(String, String)>) -> HttpResponse {
    let (services, signed_in) = match require_session(&req).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let (account, topic) = match record_ids(&path.0, &path.1, TopicId::parse) {
        Ok(ids) => ids,
        Err(response) => return response,
    };
    respond(
        blocking(move || {
            let member = member(
                &services,
                &signed_in,
                account,
                "GET",
                &format!("/topics/{topic}"),
            )?;
            let stored = get_topic(&services, &member, topic)?;
            let form = TopicForm {
                name: stored.name,
                description: stored.description.unwrap_or_default(),
            };
            topic_page(
                &services,
                &signed_in,
                (account, topic),
                StatusCode::OK,
                &form,
                &[],
            )
        })
        .await,
    )
}

/// `POST /console/accounts/{id}/topics/{topicId}`: saves the edit.
pub(super) async fn update_topic_form(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> HttpResponse {
    let (services, signed_in, pairs, (account, topic)) =
        match record_form::<Pairs, _, _>(&req, &body, &path.0, &path.1, TopicId::parse).await {
            Ok(found) => found,
            Err(response) => return response,
        };
    let outcome = blocking(move || {
        let member = member(
            &services,
            &signed_in,
            account,
            "PATCH",
            &format!("/topics/{topic}"),
        )?;
        let form = TopicForm::read(&pairs);
        match update_topic(&services, &member, topic, form.input()) {
            Ok(_) => Ok(None),
            Err(AppError::Invalid(errors)) => Ok(Some(topic_page(
                &services,
                &signed_in,
                (account, topic),
                StatusCode::BAD_REQUEST,
                &form,
                &errors.0,
            )?)),
            Err(other) => Err(other),
        }
    })
    .await;
    match outcome {
        Ok(None) => see_other(&format!("/console/accounts/{account}/topics?saved=1")),
        Ok(Some(page)) => page.into(),
        Err(error) => error_page(&error),
    }
}

/// `POST /console/accounts/{id}/topics/{topicId}/delete`: first the confirmation that names
/// the topic, then (with `confirmed=yes`) the deletion.
pub(super) async fn delete_topic_form(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> HttpResponse {
    let (services, signed_in, form, (account, topic)) =
        match record_form::<Pairs, _, _>(&req, &body, &path.0, &path.1, TopicId::parse).await {
            Ok(found) => found,
            Err(response) => return response,
        };
    let confirmed = is_confirmed(&form);
    respond(
        blocking(move || {
            let member = member(
                &services,
                &signed_in,
                account,
                "DELETE",
                &format!("/topics/{topic}"),
            )?;
            if !confirmed {
                let found = get_topic(&services, &member, topic)?;
                return confirmation_page(
                    &services,
                    &signed_in,
                    account,
                    "topics",
                    &Confirmation {
                        title: "Delete this topic?".into(),
                        what: found.name,
                        consequence: "Who unsubscribed from it is forgotten with it: \
                                      announcements can no longer name it."
                            .into(),
                        button: "Delete the topic".into(),
                        cancel: format!("/console/accounts/{account}/topics/{topic}"),
                    },
                );
            }
            let deleted = delete_topic(&services, &member, topic)?;
            done_page(
                &services,
                &signed_in,
                account,
                "topics",
                (
                    "Topic deleted",
                    &format!("The topic “{}” was deleted.", deleted.name),
                ),
                (
                    &format!("/console/accounts/{account}/topics"),
                    "Back to the topics",
                ),
            )
        })
        .await,
    )
}

// ---- Automations ----

#[derive(Debug, Serialize)]
struct AutomationForm {
    name: String,
    template_id: String,
    trigger_event_slug: String,
    trigger_event_condition: String,
    timing_condition: String,
    timing_value: String,
    is_enabled: bool,
}

impl Default for AutomationForm {
    fn default() -> Self {
        Self {
            name: String::new(),
            template_id: String::new(),
            trigger_event_slug: String::new(),
            trigger_event_condition: "once".to_owned(),
            timing_condition: "immediately".to_owned(),
            timing_value: String::new(),
            is_enabled: true,
        }
    }
}

impl AutomationForm {
    fn read(pairs: &Pairs) -> Self {
        let text = |name: &str| pairs.get(name).unwrap_or("").trim().to_owned();
        Self {
            name: text("name"),
            template_id: text("template_id"),
            trigger_event_slug: text("trigger_event_slug"),
            trigger_event_condition: text("trigger_event_condition"),
            timing_condition: text("timing_condition"),
            timing_value: text("timing_value"),
            is_enabled: pairs.get("is_enabled").is_some(),
        }
    }

    fn of(automation: &Automation) -> Self {
        Self {
            name: automation.settings.name.clone(),
            template_id: automation.template_id.to_string(),
            trigger_event_slug: automation.settings.trigger_event_slug.as_str().to_owned(),
            trigger_event_condition: automation.settings.trigger_condition.as_str().to_owned(),
            timing_condition: automation.settings.timing.condition().to_owned(),
            timing_value: automation
                .settings
                .timing
                .value()
                .map(|days| days.to_string())
                .unwrap_or_default(),
            is_enabled: automation.settings.is_enabled,
        }
    }

    /// The body the API would receive; the days are a JSON number when they read as an
    /// integer, else text the use case refuses with its own message.
    fn input(&self) -> AutomationInput {
        let filled = |text: &str| (!text.is_empty()).then(|| text.to_owned());
        let timing_value = filled(&self.timing_value).map(|text| {
            text.parse::<i64>()
                .map_or(serde_json::Value::String(text), |days| {
                    serde_json::Value::from(days)
                })
        });
        AutomationInput {
            name: filled(&self.name),
            template_id: filled(&self.template_id),
            trigger_event_slug: filled(&self.trigger_event_slug),
            trigger_event_condition: filled(&self.trigger_event_condition),
            timing_condition: filled(&self.timing_condition),
            timing_value,
            is_enabled: Some(self.is_enabled),
        }
    }
}

#[derive(Debug, Serialize)]
struct AutomationRow {
    id: String,
    name: String,
    template: String,
    trigger: String,
    timing: String,
    is_enabled: bool,
}

fn automation_form_page(
    services: &Services,
    signed_in: &SignedIn,
    account: AccountId,
    automation: Option<AutomationId>,
    status: StatusCode,
    form: &AutomationForm,
    errors: &[FieldError],
) -> Result<render::Page, AppError> {
    let member = member(services, signed_in, account, "GET", "/templates")?;
    let templates = template_choices(services, &member)?;
    let (heading, action) = match automation {
        Some(id) => (
            format!("Automation “{}”", form.name),
            format!("/console/accounts/{account}/automations/{id}"),
        ),
        None => (
            "Create an automation".to_owned(),
            format!("/console/accounts/{account}/automations"),
        ),
    };
    account_page(
        services,
        signed_in,
        account,
        status,
        "automation.html",
        ("Automation", "automations"),
        minijinja::context! {
            heading => heading, action => action, form => form,
            errors => FormErrors::new(errors, AUTOMATION_FIELDS),
            templates => templates,
            automation_id => automation.map(|id| id.to_string()),
        },
    )
}

/// `GET /console/accounts/{id}/automations`.
pub(super) async fn automations(
    req: HttpRequest,
    path: web::Path<String>,
    query: web::Query<SavedQuery>,
) -> HttpResponse {
    let (services, signed_in, account) = match account_session(&req, &path).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let saved = query.saved.is_some();
    respond(
        blocking(move || {
            let member = member(&services, &signed_in, account, "GET", "/automations")?;
            let rows: Vec<AutomationRow> = list_automations(&services, &member, FIRST)?
                .into_iter()
                .map(|(automation, template)| AutomationRow {
                    id: automation.id.to_string(),
                    name: automation.settings.name.clone(),
                    template: template.map_or_else(
                        || automation.template_id.to_string(),
                        |template| template.name,
                    ),
                    trigger: format!(
                        "{} ({})",
                        automation.settings.trigger_event_slug.as_str(),
                        automation.settings.trigger_condition.as_str()
                    ),
                    timing: match automation.settings.timing.value() {
                        Some(days) => format!("{days} days after"),
                        None => "immediately".to_owned(),
                    },
                    is_enabled: automation.settings.is_enabled,
                })
                .collect();
            account_page(
                &services,
                &signed_in,
                account,
                StatusCode::OK,
                "automations.html",
                ("Automations", "automations"),
                minijinja::context! { automations => rows, saved => saved, listed => LISTED },
            )
        })
        .await,
    )
}

/// `GET /console/accounts/{id}/automations/new`.
pub(super) async fn new_automation(req: HttpRequest, path: web::Path<String>) -> HttpResponse {
    let (services, signed_in, account) = match account_session(&req, &path).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    respond(
        blocking(move || {
            member(&services, &signed_in, account, "POST", "/automations")?;
            automation_form_page(
                &services,
                &signed_in,
                account,
                None,
                StatusCode::OK,
                &AutomationForm::default(),
                &[],
            )
        })
        .await,
    )
}

/// `POST /console/accounts/{id}/automations`.
pub(super) async fn create_automation_form(
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Bytes,
) -> HttpResponse {
    let (services, signed_in, pairs, account) =
        match account_form::<Pairs>(&req, &body, &path).await {
            Ok(found) => found,
            Err(response) => return response,
        };
    let outcome = blocking(move || {
        let member = member(&services, &signed_in, account, "POST", "/automations")?;
        let form = AutomationForm::read(&pairs);
        match create_automation(&services, &member, form.input()) {
            Ok(_) => Ok(None),
            Err(AppError::Invalid(errors)) => Ok(Some(automation_form_page(
                &services,
                &signed_in,
                account,
                None,
                StatusCode::BAD_REQUEST,
                &form,
                &errors.0,
            )?)),
            Err(other) => Err(other),
        }
    })
    .await;
    match outcome {
        Ok(None) => see_other(&format!("/console/accounts/{account}/automations?saved=1")),
        Ok(Some(page)) => page.into(),
        Err(error) => error_page(&error),
    }
}

/// `GET /console/accounts/{id}/automations/{automationId}`: the edit form.
pub(super) async fn automation(
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> HttpResponse {
    let (services, signed_in) = match require_session(&req).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let (account, automation) = match record_ids(&path.0, &path.1, AutomationId::parse) {
        Ok(ids) => ids,
        Err(response) => return response,
    };
    respond(
        blocking(move || {
            let member = member(
                &services,
                &signed_in,
                account,
                "GET",
                &format!("/automations/{automation}"),
            )?;
            let stored = get_automation(&services, &member, automation)?;
            automation_form_page(
                &services,
                &signed_in,
                account,
                Some(automation),
                StatusCode::OK,
                &AutomationForm::of(&stored),
                &[],
            )
        })
        .await,
    )
}

/// `POST /console/accounts/{id}/automations/{automationId}`: saves the edit.
pub(super) async fn update_automation_form(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> HttpResponse {
    let (services, signed_in, pairs) = match signed_in_form::<Pairs>(&req, &body).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let (account, automation) = match record_ids(&path.0, &path.1, AutomationId::parse) {
        Ok(ids) => ids,
        Err(response) => return response,
    };
    let outcome = blocking(move || {
        let member = member(
            &services,
            &signed_in,
            account,
            "PATCH",
            &format!("/automations/{automation}"),
        )?;
        let form = AutomationForm::read(&pairs);
        match update_automation(&services, &member, automation, form.input()) {
            Ok(_) => Ok(None),
            Err(AppError::Invalid(errors)) => Ok(Some(automation_form_page(
                &services,
                &signed_in,
                account,
                Some(automation),
                StatusCode::BAD_REQUEST,
                &form,
                &errors.0,
            )?)),
            Err(other) => Err(other),
        }
    })
    .await;
    match outcome {
        Ok(None) => see_other(&format!("/console/accounts/{account}/automations?saved=1")),
        Ok(Some(page)) => page.into(),
        Err(error) => error_page(&error),
    }
}

/// `POST /console/accounts/{id}/automations/{automationId}/delete`: first the confirmation
/// that names the automation, then (with `confirmed=yes`) the deletion.
pub(super) async fn delete_automation_form(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> HttpResponse {
    let (services, signed_in, form) = match signed_in_form::<Pairs>(&req, &body).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let (account, automation) = match record_ids(&path.0, &path.1, AutomationId::parse) {
        Ok(ids) => ids,
        Err(response) => return response,
    };
    let confirmed = is_confirmed(&form);
    respond(
        blocking(move || {
            let member = member(
                &services,
                &signed_in,
                account,
                "DELETE",
                &format!("/automations/{automation}"),
            )?;
            if !confirmed {
                let found = get_automation(&services, &member, automation)?;
                return confirmation_page(
                    &services,
                    &signed_in,
                    account,
                    "automations",
                    &Confirmation {
                        title: "Delete this automation?".into(),
                        what: found.settings.name,
                        consequence: "It stops firing on its event. Messages it already \
                                      queued are still sent."
                            .into(),
                        button: "Delete the automation".into(),
                        cancel: format!("/console/accounts/{account}/automations/{automation}"),
                    },
                );
            }
            let deleted = delete_automation(&services, &member, automation)?;
            done_page(
                &services,
                &signed_in,
                account,
                "automations",
                (
                    "Automation deleted",
                    &format!("The automation “{}” was deleted.", deleted.settings.name),
                ),
                (
                    &format!("/console/accounts/{account}/automations"),
                    "Back to the automations",
                ),
            )
        })
        .await,
    )
}
