use mailroom_domain::{slug::EventSlug, ContactEventId, ContactId, ValidationErrors};

use super::{parse_email_and_attributes, write_custom_attributes};
use crate::{
    auth::Member,
    automations::queue_triggered_messages,
    ports::{in_single_statement, in_transaction, ContactEvent, EventOfEmail},
    AppError, Services,
};

/// The raw body of `POST …/events`.
#[derive(Debug, Clone, Default)]
pub struct RecordEventRequest {
    /// `email`, required.
    pub email: Option<String>,
    /// `slug`, required; normalised to snake_case.
    pub slug: Option<String>,
    /// Optional custom attributes to merge into the contact.
    pub attributes: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Records a contact event: creates the contact when the email is unknown, merges the
/// custom attributes, stores the event and moves `event.<slug>` forward, all in one
/// transaction with the messages of the automations it triggers, so a 200 means the event
/// and its consequences are durable.
///
/// # Errors
/// [`AppError::Invalid`] naming each bad field.
pub fn record_event(
    services: &Services,
    member: &Member,
    request: RecordEventRequest,
) -> Result<ContactEvent, AppError> {
    let account = member.account();
    let mut errors = ValidationErrors::new();
    let (email, attributes) =
        parse_email_and_attributes(request.email.as_deref(), request.attributes, &mut errors);
    let slug = match request.slug.as_deref() {
        None => {
            errors.push("slug", "is required");
            None
        }
        Some(slug) => errors.collect("slug", EventSlug::normalize(slug)),
    };
    errors.into_result()?;
    let (Some(email), Some(slug)) = (email, slug) else {
        return Err(AppError::Internal("validated event lost a field".into()));
    };
    let now = services.clock.now();
    let new_contact = ContactId::from_uuid(services.ids.next_uuid());
    let event_id = ContactEventId::from_uuid(services.ids.next_uuid());
    let of_email = EventOfEmail {
        id: event_id,
        email: &email,
        new_contact,
        slug: &slug,
        occurred_at: now,
    };
    // The usual event (no attributes, no automation listening) is one statement, so it
    // runs without BEGIN and COMMIT: one round trip instead of three (docs/performance.md,
    // "Design choices, measured"). When an automation listens the
    // statement writes nothing and the event goes the transactional way below.
    if attributes.is_empty() {
        let recorded = in_single_statement(services.db.as_ref(), |db| {
            Ok(db.record_event_unless_listened(account, &of_email)?)
        })?;
        if let Some(contact_id) = recorded {
            return Ok(ContactEvent {
                id: event_id,
                contact_id,
                slug,
                occurred_at: now,
            });
        }
    }
    let (event, queued) = in_transaction(services.db.as_ref(), |tx| {
        let recorded = tx.record_event(account, &of_email)?;
        let contact_id = recorded.contact_id;
        write_custom_attributes(tx, account, contact_id, &attributes, now)?;
        let event = ContactEvent {
            id: event_id,
            contact_id,
            slug: slug.clone(),
            occurred_at: now,
        };
        if !recorded.triggers {
            return Ok((event, 0));
        }
        // In the event's transaction: an event and the messages it triggers are durable
        // together, or neither is.
        let queued = queue_triggered_messages(
            tx,
            services,
            account,
            contact_id,
            email.as_str(),
            &event.slug,
            now,
        )?;
        Ok((event, queued))
    })?;
    if queued > 0 {
        services.queue_wakeup.messages_queued();
    }
    Ok(event)
}
