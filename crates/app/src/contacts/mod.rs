//! The audience: contacts, their attributes and events, lists, search and metas.

mod attribute_metas;
mod contact_events;
mod delete_contact;
mod event_names;
mod export_contact;
mod get_contact;
mod import_contacts;
mod import_csv;
mod list_contacts;
mod record_event;
mod search_contacts;
mod unbounce_contact;
mod upsert_contact;

pub use attribute_metas::{count_attribute_metas, list_attribute_metas};
pub use contact_events::list_contact_events;
pub use delete_contact::{delete_contact, erase_contact};
pub use event_names::{event_names, fold_event_names, FOLD_BATCH};
pub use export_contact::{
    contact_export_events, contact_export_head, contact_export_messages, ContactExportHead,
    EXPORT_PAGE,
};
pub use get_contact::get_contact;
pub use import_contacts::{
    import_contacts, start_import, ContactImport, ImportBatchReport, ImportRow, ImportSummary,
    RejectedRow, MAX_COLUMNS, MAX_REPORTED_ERRORS,
};
pub(crate) use import_csv::{bounded_reader, next_row, read_header};
pub use import_csv::{import_csv, MAX_RECORD_BYTES};
pub use list_contacts::{count_contacts, list_contacts};
pub use record_event::{record_event, RecordEventRequest};
pub(crate) use search_contacts::audience_segment;
pub use search_contacts::{count_search, search_contacts, SearchRequest};
pub use unbounce_contact::unbounce_contact;
pub use upsert_contact::{upsert_contact, UpsertContactRequest, UpsertedContact};

use std::collections::HashMap;

use mailroom_domain::{
    attribute::{
        check_custom_slug, check_type, too_many_custom_attributes, AttributeSource, AttributeType,
        AttributeValue, ResolvedAttributes, SYSTEM_ATTRIBUTES,
    },
    condition::AttributeTypes,
    contact::Contact,
    email::EmailAddress,
    AccountId, ContactId, Timestamp, ValidationErrors,
};

use crate::{ports::UnitOfWork, AppError, StoreError};

/// The resolved attributes (system, custom, event) of these contacts of `account`, by id:
/// the system ones from the contacts already read, the rest in one read of the store.
pub(crate) fn resolve_attributes<'a>(
    tx: &mut dyn UnitOfWork,
    account: AccountId,
    contacts: impl IntoIterator<Item = &'a Contact>,
) -> Result<HashMap<ContactId, ResolvedAttributes>, StoreError> {
    let mut resolved: HashMap<ContactId, ResolvedAttributes> = contacts
        .into_iter()
        .map(|contact| (contact.id, contact.system_attributes()))
        .collect();
    let ids: Vec<ContactId> = resolved.keys().copied().collect();
    if ids.is_empty() {
        return Ok(resolved);
    }
    for (id, stored) in tx.stored_attributes(account, &ids)? {
        if let Some(attributes) = resolved.get_mut(&id) {
            attributes.extend(stored);
        }
    }
    Ok(resolved)
}

/// [`resolve_attributes`] of one contact.
pub(crate) fn resolve_contact_attributes(
    tx: &mut dyn UnitOfWork,
    account: AccountId,
    contact: &Contact,
) -> Result<ResolvedAttributes, StoreError> {
    Ok(resolve_attributes(tx, account, [contact])?
        .remove(&contact.id)
        .unwrap_or_default())
}

/// Parses the `email` and custom `attributes` that contact upserts and events share,
/// recording every problem in `errors`. Attribute errors name `attributes.<slug>`.
fn parse_email_and_attributes(
    email: Option<&str>,
    attributes: Option<serde_json::Map<String, serde_json::Value>>,
    errors: &mut ValidationErrors,
) -> (Option<EmailAddress>, Vec<(String, AttributeValue)>) {
    let email = match email {
        None => {
            errors.push("email", "is required");
            None
        }
        Some(email) => errors.collect("email", EmailAddress::parse(email)),
    };
    let mut values = Vec::new();
    for (slug, value) in attributes.unwrap_or_default() {
        let field = format!("attributes.{slug}");
        if let Err(error) = check_custom_slug(&slug) {
            errors.push(&field, error.to_string());
            continue;
        }
        if let Some(value) = errors.collect(&field, AttributeValue::from_json(&value)) {
            values.push((slug, value));
        }
    }
    (email, values)
}

/// Writes custom attributes, enforcing that a slug keeps the type of its first write (also
/// against a concurrent first write, which `ensure_attribute_metas` reports back).
pub(crate) fn write_custom_attributes(
    tx: &mut dyn UnitOfWork,
    account: AccountId,
    contact: ContactId,
    values: &[(String, AttributeValue)],
    now: Timestamp,
) -> Result<(), AppError> {
    if values.is_empty() {
        return Ok(());
    }
    let metas: Vec<_> = values
        .iter()
        .map(|(slug, value)| {
            (
                slug.clone(),
                value.attribute_type(),
                AttributeSource::Custom,
            )
        })
        .collect();
    let stored = tx.ensure_attribute_metas(account, &metas, now)?;
    let mut errors = ValidationErrors::new();
    for (slug, value) in values {
        let field = format!("attributes.{slug}");
        match stored.get(slug).copied() {
            // Not recorded: the account has as many custom slugs as it may.
            None => errors.push(field, too_many_custom_attributes()),
            Some(stored) => {
                if let Err(error) = check_type(Some(stored), value) {
                    errors.push(field, error.to_string());
                }
            }
        }
    }
    errors.into_result()?;
    tx.set_attributes(account, contact, values)?;
    Ok(())
}

/// The account's attribute types, system ones included, for condition parsing.
pub(crate) struct AccountAttributeTypes(HashMap<String, AttributeType>);

impl AccountAttributeTypes {
    pub(crate) fn load(tx: &mut dyn UnitOfWork, account: AccountId) -> Result<Self, AppError> {
        let mut types = tx.attribute_types(account)?;
        for (slug, attribute_type) in SYSTEM_ATTRIBUTES {
            types.insert(slug.to_owned(), attribute_type);
        }
        Ok(Self(types))
    }
}

impl AttributeTypes for AccountAttributeTypes {
    fn attribute_type(&self, slug: &str) -> Option<AttributeType> {
        self.0.get(slug).copied()
    }
}
