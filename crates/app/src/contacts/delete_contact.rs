use mailroom_domain::{
    contact::Contact,
    email::normalize_email,
    suppression::{SuppressionReason, SuppressionSource},
    webhook_event::{ContactChange, ContactNotice},
    AccountId, ContactId,
};

use crate::{
    auth::Member,
    ports::{in_transaction, UnitOfWork},
    suppressions::{existing_key, keep_topic_unsubscriptions, suppress, Listing},
    AppError, Services,
};

/// Lists the address for each mark the contact carries, so the deletion does not forget
/// it (a mark made since the list exists has its entry already, which is kept as it is).
fn keep_marks_listed(
    tx: &mut dyn UnitOfWork,
    services: &Services,
    account: AccountId,
    contact: &Contact,
) -> Result<(), AppError> {
    let marks = [
        (contact.hard_bounced_at, SuppressionReason::HardBounce),
        (contact.complaint_at, SuppressionReason::Complaint),
        (contact.unsubscribed_at, SuppressionReason::Unsubscribe),
    ];
    for (at, reason) in marks {
        if let Some(at) = at {
            suppress(
                tx,
                services,
                account,
                &Listing {
                    email: &contact.email,
                    reason,
                    source: SuppressionSource::ContactDeleted,
                    detail: None,
                    at,
                },
            )?;
        }
    }
    Ok(())
}

/// Deletes a contact with its events, attributes and unsubscriptions, and returns it.
/// Its address stays on the suppression list for every mark it carried, and its topic
/// unsubscriptions are kept by the address's hash for a contact made again.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown contact.
pub fn delete_contact(
    services: &Services,
    member: &Member,
    id: ContactId,
) -> Result<Contact, AppError> {
    remove_contact(services, member, id, false)
}

/// The erasure of a person (GDPR article 17): the contact goes as with
/// [`delete_contact`], and so does what names the person elsewhere: on every message to
/// the address the address itself, the send's data, the last reply, the idempotency key
/// and the tracked links; the address and the SMTP reply in webhook events about the
/// contact or the address; the address in clear and the detail of its suppression
/// entries. What stays: each message's ids, times and states (the account's history, and
/// the counts), and the suppression entries by the address's keyed hash, so the person
/// is never mailed again (docs/api-decisions.md, "Suppression list"). The
/// `contact.deleted` event it queues carries an empty `email`.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown contact.
pub fn erase_contact(
    services: &Services,
    member: &Member,
    id: ContactId,
) -> Result<Contact, AppError> {
    remove_contact(services, member, id, true)
}

fn remove_contact(
    services: &Services,
    member: &Member,
    id: ContactId,
    erase: bool,
) -> Result<Contact, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        let contact = tx.find_contact(account, id)?.ok_or(AppError::NotFound)?;
        keep_marks_listed(tx, services, account, &contact)?;
        keep_topic_unsubscriptions(tx, services, account, &contact)?;
        tx.delete_contact(account, id)?;
        if erase {
            tx.erase_personal_traces(account, id, &normalize_email(&contact.email))?;
            if let Some(key) = existing_key(tx, services, account)? {
                tx.forget_suppressed_address(account, key.hash(&contact.email))?;
            }
        }
        // In this transaction, so the event exists exactly when the deletion does.
        let notice = ContactNotice {
            account_id: account,
            contact_id: id,
            email: if erase {
                String::new()
            } else {
                contact.email.clone()
            },
            occurred_at: services.clock.now(),
            change: ContactChange::Deleted,
        };
        crate::webhook_events::queue_webhook_event(tx, services, &notice)?;
        Ok(contact)
    })
}
