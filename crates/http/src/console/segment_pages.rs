//! Saved segments: the list with each segment's live count, the save from the segment
//! builder, and the delete, over the use cases of `…/segments`.

use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use mailroom_app::{
    console::SignedIn,
    segments::{
        count_segment_contacts, create_segment, delete_segment, get_segment, list_segments,
    },
    AppError, Services,
};
use mailroom_domain::{
    condition::AudienceDefinition, paging::PageRequest, saved_segment::SavedSegment, AccountId,
    SegmentId,
};
use serde::{Deserialize, Serialize};

use super::{
    blocking,
    contact_pages::{builder_page, condition_words, readable, SaveCard, SegmentForm},
    error_page,
    page_kit::{
        account_form, account_page, account_session, confirmation_page, is_confirmed, member,
        record_form, respond, Confirmation, Pager, Pairs,
    },
    pages::{day_and_minute, see_other},
    render,
};

/// Segments per page: each row counts its contacts when the page is drawn.
const PAGE_SEGMENTS: u32 = 20;

#[derive(Debug, Deserialize)]
pub(super) struct ListQuery {
    #[serde(default)]
    start: Option<u64>,
    #[serde(default)]
    saved: Option<String>,
    #[serde(default)]
    deleted: Option<String>,
}

#[derive(Debug, Serialize)]
struct SegmentRow {
    id: String,
    name: String,
    summary: String,
    count: Option<u64>,
    updated_at: String,
    builder_link: String,
}

/// A condition's value as the builder's text field holds it.
fn value_text(value: Option<&serde_json::Value>) -> String {
    match value {
        None => String::new(),
        Some(serde_json::Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
    }
}

/// The definition in words, for the list.
fn summary(segment: &SavedSegment) -> String {
    let definition = &segment.definition;
    let mut parts: Vec<String> = definition.attributes.iter().map(condition_words).collect();
    if parts.is_empty() {
        parts.push("every contact".to_owned());
    }
    if definition.include_unsubscribed {
        parts.push("unsubscribed included".to_owned());
    }
    if definition.topic.is_some() {
        parts.push("a topic's unsubscribers left out".to_owned());
    }
    parts.join("; ")
}

/// The builder's address with the segment's definition filled in and counted.
fn builder_link(account: AccountId, segment: &SavedSegment) -> String {
    audience_link(account, &segment.definition)
}

/// The builder's address with `definition` filled in and counted (where it can be saved
/// as a segment).
pub(super) fn audience_link(account: AccountId, definition: &AudienceDefinition) -> String {
    let mut query: Vec<(String, String)> = vec![(
        "rows".to_owned(),
        definition.attributes.len().max(1).to_string(),
    )];
    for (index, condition) in definition.attributes.iter().enumerate() {
        query.push((format!("c{index}_slug"), condition.slug.clone()));
        query.push((format!("c{index}_operator"), condition.operator.clone()));
        query.push((
            format!("c{index}_value"),
            value_text(condition.value.as_ref()),
        ));
    }
    if definition.include_unsubscribed {
        query.push(("include_unsubscribed".to_owned(), "1".to_owned()));
    }
    if let Some(topic) = definition.topic {
        query.push(("topic".to_owned(), topic.to_string()));
    }
    query.push(("count".to_owned(), "1".to_owned()));
    format!(
        "/console/accounts/{account}/contacts/segment?{}",
        serde_urlencoded::to_string(&query).unwrap_or_default()
    )
}

fn list_page(
    services: &Services,
    signed_in: &SignedIn,
    account: AccountId,
    query: &ListQuery,
) -> Result<render::Page, AppError> {
    let member = member(services, signed_in, account, "GET", "/segments")?;
    let page = PageRequest {
        start: query.start.unwrap_or(0).min(super::page_kit::MAX_START),
        limit: PAGE_SEGMENTS,
    };
    let segments = list_segments(services, &member, page)?;
    let mut rows = Vec::with_capacity(segments.len());
    for segment in &segments {
        rows.push(SegmentRow {
            id: segment.id.to_string(),
            name: segment.name.clone(),
            summary: summary(segment),
            count: Some(count_segment_contacts(services, &member, segment.id)?),
            updated_at: day_and_minute(segment.updated_at),
            builder_link: builder_link(account, segment),
        });
    }
    let pager = Pager::new(page, rows.len(), "");
    account_page(
        services,
        signed_in,
        account,
        StatusCode::OK,
        "segments.html",
        ("Saved segments", "segments"),
        minijinja::context! {
            segments => rows,
            pager => pager,
            saved => query.saved.is_some(),
            deleted => query.deleted.is_some(),
        },
    )
}

/// `GET /console/accounts/{id}/segments`: the saved segments, each with its count now.
pub(super) async fn list(
    req: HttpRequest,
    path: web::Path<String>,
    query: web::Query<ListQuery>,
) -> HttpResponse {
    let (services, signed_in, account) = match account_session(&req, &path).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let query = query.into_inner();
    respond(blocking(move || list_page(&services, &signed_in, account, &query)).await)
}

/// `POST /console/accounts/{id}/segments`: saves the builder's conditions under a name.
/// A refusal shows the builder again with the reasons on its save card.
pub(super) async fn create(
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
        let member = member(&services, &signed_in, account, "POST", "/segments")?;
        let form = SegmentForm::read(&pairs);
        let name = pairs.get("name").unwrap_or("");
        let refused = match form.request() {
            Err(errors) => errors
                .into_iter()
                .map(|e| format!("{}: {}", e.field, e.message))
                .collect(),
            Ok(request) => {
                match create_segment(&services, &member, Some(name), request.definition()) {
                    Ok(_) => return Ok(None),
                    Err(AppError::Invalid(errors)) => readable(errors.0, &form),
                    Err(AppError::BadRequest(reason)) => vec![reason],
                    Err(other) => return Err(other),
                }
            }
        };
        let card = SaveCard {
            name: name.trim().to_owned(),
            errors: refused,
        };
        builder_page(&services, &signed_in, account, &member, &pairs, Some(card)).map(Some)
    })
    .await;
    match outcome {
        Ok(None) => see_other(&format!("/console/accounts/{account}/segments?saved=1")),
        Ok(Some(page)) => page.into(),
        Err(error) => error_page(&error),
    }
}

/// `POST /console/accounts/{id}/segments/{segmentId}/delete`: first the confirmation that
/// names the segment, then (with `confirmed=yes`) the deletion.
pub(super) async fn delete(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> HttpResponse {
    let (services, signed_in, form, (account, segment)) =
        match record_form::<Pairs, _, _>(&req, &body, &path.0, &path.1, SegmentId::parse).await {
            Ok(found) => found,
            Err(response) => return response,
        };
    let confirmed = is_confirmed(&form);
    let done = blocking(move || {
        let member = member(
            &services,
            &signed_in,
            account,
            "DELETE",
            &format!("/segments/{segment}"),
        )?;
        if !confirmed {
            let found = get_segment(&services, &member, segment)?;
            return confirmation_page(
                &services,
                &signed_in,
                account,
                "segments",
                &Confirmation {
                    title: "Delete this segment?".into(),
                    what: found.name,
                    consequence: "Only the saved definition goes: no contact changes, and \
                                  announcements made from it keep the audience they copied."
                        .into(),
                    button: "Delete the segment".into(),
                    cancel: format!("/console/accounts/{account}/segments"),
                },
            )
            .map(Some);
        }
        delete_segment(&services, &member, segment).map(|_| None)
    })
    .await;
    match done {
        Ok(Some(page)) => page.into(),
        Ok(None) => see_other(&format!("/console/accounts/{account}/segments?deleted=1")),
        Err(error) => error_page(&error),
    }
}

#[cfg(test)]
mod tests {
    use mailroom_domain::{condition::ConditionInput, Timestamp, TopicId};
    use serde_json::json;

    use super::*;

    #[test]
    fn the_builder_link_fills_in_the_definition() {
        let at = Timestamp::from_datetime(time::OffsetDateTime::UNIX_EPOCH);
        let topic = TopicId::parse("01936c5e-7b2a-7cde-8f00-0123456789ab").expect("id");
        let segment = SavedSegment {
            id: SegmentId::parse("01936c5e-7b2a-7cde-8f00-0123456789ac").expect("id"),
            name: "Pros".into(),
            definition: AudienceDefinition {
                attributes: vec![
                    ConditionInput {
                        slug: "plan".into(),
                        operator: "s_equal".into(),
                        value: Some(json!("pro & co")),
                    },
                    ConditionInput {
                        slug: "seats".into(),
                        operator: "exists".into(),
                        value: None,
                    },
                ],
                include_unsubscribed: true,
                topic: Some(topic),
            },
            created_at: at,
            updated_at: at,
        };
        let account = AccountId::parse("01936c5e-7b2a-7cde-8f00-0123456789ad").expect("id");
        let link = builder_link(account, &segment);
        let (_, query) = link.split_once('?').expect("a query");
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).expect("pairs");
        let form = SegmentForm::read(&Pairs(pairs));
        let request = form.request().expect("a request");
        assert_eq!(request.definition(), segment.definition);
        assert_eq!(
            summary(&segment),
            "plan is “pro & co”; seats has a value; unsubscribed included; \
             a topic's unsubscribers left out"
        );
    }
}
