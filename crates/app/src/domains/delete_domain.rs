use mailroom_domain::SendingDomainId;

use super::DomainView;
use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// Deletes a sending domain and its keys, and returns it. Mail from it is no longer
/// signed, and once no verified domain is left the sender rule no longer applies.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown domain.
pub fn delete_domain(
    services: &Services,
    member: &Member,
    id: SendingDomainId,
) -> Result<DomainView, AppError> {
    let account = member.account();
    let domain = in_transaction(services.db.as_ref(), |tx| {
        let domain = tx
            .find_sending_domain(account, id, true)?
            .ok_or(AppError::NotFound)?;
        tx.delete_sending_domain(account, id)?;
        Ok(domain)
    })?;
    Ok(DomainView::new(services, domain))
}
