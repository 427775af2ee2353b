use mailroom_domain::{
    attribute::ResolvedAttributes, contact::Contact, ContactId, ValidationErrors,
};

use super::{parse_email_and_attributes, write_custom_attributes};
use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// The raw body of `POST …/contacts`.
#[derive(Debug, Clone, Default)]
pub struct UpsertContactRequest {
    /// `email`, required.
    pub email: Option<String>,
    /// Custom attributes to merge.
    pub attributes: Option<serde_json::Map<String, serde_json::Value>>,
}

/// The contact after the upsert, with its resolved attributes.
#[derive(Debug, Clone)]
pub struct UpsertedContact {
    /// The contact.
    pub contact: Contact,
    /// Its resolved attributes.
    pub attributes: ResolvedAttributes,
    /// Whether this call created it.
    pub created: bool,
}

/// Creates the contact or merges attributes into the existing one (matched by email,
/// case-insensitively).
///
/// # Errors
/// [`AppError::Invalid`] naming each bad field.
pub fn upsert_contact(
    services: &Services,
    member: &Member,
    request: UpsertContactRequest,
) -> Result<UpsertedContact, AppError> {
    let account = member.account();
    let mut errors = ValidationErrors::new();
    let (email, attributes) =
        parse_email_and_attributes(request.email.as_deref(), request.attributes, &mut errors);
    errors.into_result()?;
    let email =
        email.ok_or_else(|| AppError::Internal("validated contact lost its email".into()))?;
    let now = services.clock.now();
    let new_contact = ContactId::from_uuid(services.ids.next_uuid());
    in_transaction(services.db.as_ref(), |tx| {
        let (contact, created) = tx.upsert_contact(account, new_contact, &email, now)?;
        write_custom_attributes(tx, account, contact.id, &attributes, now)?;
        let attributes = super::resolve_contact_attributes(tx, account, &contact)?;
        Ok(UpsertedContact {
            contact,
            attributes,
            created,
        })
    })
}
