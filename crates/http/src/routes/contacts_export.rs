//! `GET /v2/accounts/{accountId}/contacts/{contactId}/export`: everything kept about one
//! person, as one JSON document streamed a page at a time.

use actix_web::{get, web, HttpResponse};
use mailroom_app::{
    contacts::{self, EXPORT_PAGE},
    Services,
};
use mailroom_domain::{AccountId, ContactId, Timestamp};
use serde::Serialize;
use utoipa::ToSchema;

use crate::{
    blocking::run_blocking,
    extract::record_id,
    problem::{ApiError, Problem},
    routes::{
        contacts_dto::{ContactDto, ContactEventDto},
        messages_dto::MessageDto,
        suppressions_dto::SuppressionDto,
    },
    tenancy::Membership,
};

/// The document of `GET …/contacts/{contactId}/export`. The server writes it piece by
/// piece; this type describes it whole, for the API reference.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContactExportDto {
    /// When the export was made.
    #[schema(value_type = String, format = DateTime)]
    pub export_date: Timestamp,
    /// The contact with its attributes and topic unsubscriptions.
    pub contact: ContactDto,
    /// Its address's entries on the suppression list.
    pub suppressions: Vec<SuppressionDto>,
    /// Every event of the contact, newest first.
    pub events: Vec<ContactEventDto>,
    /// Every message to the contact, newest first, with its template data.
    pub messages: Vec<MessageDto>,
}

/// Which array of the document the stream is writing.
#[derive(Debug, Clone, Copy)]
enum Section {
    Events,
    Messages,
}

/// Where the stream stands: the section, the offset of its next page, and whether an
/// item of that section was written already (so the next one needs a comma).
struct Cursor {
    section: Section,
    start: u64,
    wrote_one: bool,
}

/// Everything the account keeps about one person: the contact with its attributes and
/// topic unsubscriptions, its address's entries on the suppression list, every event
/// and every message sent to it (with the data it was rendered with). Streamed: events
/// and messages are read 100 at a time, each page in a short transaction of its own, so
/// memory stays at one page whatever the history. A message or an event recorded
/// during the export may appear twice or not at all; the head is read before the answer
/// starts, so an unknown contact is a 404.
#[utoipa::path(
    tag = "contacts", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("contactId" = String, Path, description = "Contact id")),
    responses((status = 200, body = ContactExportDto), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[get("/accounts/{accountId}/contacts/{contactId}/export")]
pub(crate) async fn export_contact(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let contact: ContactId = record_id(&path.1)?;
    let member = member.0;
    let account = member.account();
    let head = {
        let services = services.clone();
        run_blocking(move || contacts::contact_export_head(&services, &member, contact)).await?
    };
    let mut opening = serde_json::to_vec(&serde_json::json!({
        "exportDate": services.clock.now(),
        "contact": ContactDto::with_attributes(head.contact, head.attributes),
        "suppressions": head.suppressions.into_iter().map(SuppressionDto::from).collect::<Vec<_>>(),
    }))
    .map_err(|error| ApiError::from(mailroom_app::AppError::Internal(error.to_string())))?;
    // The head's closing brace gives way to the two arrays the pages fill.
    opening.pop();
    opening.extend_from_slice(br#","events":["#);
    // Once the answer has started, a failure can only cut the body short: the client
    // gets a document that does not parse, and the failure is logged.
    fn cut_short(error: impl std::fmt::Debug) -> std::io::Error {
        tracing::warn!(?error, "a contact export stopped part way");
        std::io::Error::other(format!("{error:?}"))
    }
    let start = Cursor {
        section: Section::Events,
        start: 0,
        wrote_one: false,
    };
    let pages = futures_util::stream::try_unfold(
        (Some(start), services),
        move |(cursor, services)| async move {
            let Some(mut cursor) = cursor else {
                return Ok(None);
            };
            let reader = services.clone();
            let (start, section) = (cursor.start, cursor.section);
            let (mut chunk, read) =
                run_blocking(move || page_json(&reader, &member, account, contact, section, start))
                    .await
                    .map_err(cut_short)?;
            if cursor.wrote_one && !chunk.is_empty() {
                chunk.insert(0, b',');
            }
            cursor.wrote_one |= read > 0;
            let next = if read < EXPORT_PAGE as usize {
                match cursor.section {
                    Section::Events => {
                        chunk.extend_from_slice(br#"],"messages":["#);
                        Some(Cursor {
                            section: Section::Messages,
                            start: 0,
                            wrote_one: false,
                        })
                    }
                    Section::Messages => {
                        chunk.extend_from_slice(b"]}");
                        None
                    }
                }
            } else {
                cursor.start += read as u64;
                Some(cursor)
            };
            Ok::<_, std::io::Error>(Some((web::Bytes::from(chunk), (next, services))))
        },
    );
    let opening =
        futures_util::stream::once(
            async move { Ok::<_, std::io::Error>(web::Bytes::from(opening)) },
        );
    use futures_util::StreamExt as _;
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .insert_header((
            "content-disposition",
            format!("attachment; filename=\"contact-{contact}.json\""),
        ))
        .streaming(opening.chain(pages)))
}

/// One page of `section` as comma-separated JSON values, and how many items it held.
fn page_json(
    services: &Services,
    member: &mailroom_app::auth::Member,
    account: AccountId,
    contact: ContactId,
    section: Section,
    start: u64,
) -> Result<(Vec<u8>, usize), mailroom_app::AppError> {
    fn join<T: Serialize>(items: &[T]) -> Result<Vec<u8>, mailroom_app::AppError> {
        let mut out = Vec::new();
        for (at, item) in items.iter().enumerate() {
            if at > 0 {
                out.push(b',');
            }
            serde_json::to_writer(&mut out, item)
                .map_err(|error| mailroom_app::AppError::Internal(error.to_string()))?;
        }
        Ok(out)
    }
    match section {
        Section::Events => {
            let events = contacts::contact_export_events(services, member, contact, start)?;
            let read = events.len();
            let dtos: Vec<ContactEventDto> = events
                .into_iter()
                .map(|event| ContactEventDto::new(account, event))
                .collect();
            Ok((join(&dtos)?, read))
        }
        Section::Messages => {
            let messages = contacts::contact_export_messages(services, member, contact, start)?;
            let read = messages.len();
            let dtos: Vec<MessageDto> = messages.into_iter().map(MessageDto::from).collect();
            Ok((join(&dtos)?, read))
        }
    }
}
