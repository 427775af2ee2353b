use mailroom_domain::{contact::Contact, suppression::SuppressionReason, ContactId};

use crate::{auth::Member, ports::in_transaction, suppressions::existing_key, AppError, Services};

/// Clears the hard-bounce flag, and the address's bounce entry on the suppression list,
/// so the contact can receive mail again. The body rule
/// (exactly `{"hardBounced": false}`) is checked by the caller's parser.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown contact.
pub fn unbounce_contact(
    services: &Services,
    member: &Member,
    id: ContactId,
) -> Result<Contact, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        if !tx.clear_hard_bounce(account, id)? {
            return Err(AppError::NotFound);
        }
        let contact = tx.find_contact(account, id)?.ok_or(AppError::NotFound)?;
        // The address's bounce entry goes with the flag, or the list would still stop it.
        if let Some(key) = existing_key(tx, services, account)? {
            tx.remove_suppressions(
                account,
                key.hash(&contact.email),
                &[SuppressionReason::HardBounce],
            )?;
        }
        Ok(contact)
    })
}
