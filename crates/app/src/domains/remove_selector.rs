use mailroom_domain::{sending_domain::KeyRemovalRefused, SendingDomainId};

use super::DomainView;
use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// Removes one key of the domain (after a rotation, the old selector) and answers the
/// domain as it is now. Its record may then be taken out of DNS.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown domain or selector; [`AppError::BadRequest`]
/// for the domain's only key.
pub fn remove_selector(
    services: &Services,
    member: &Member,
    id: SendingDomainId,
    selector: &str,
) -> Result<DomainView, AppError> {
    let account = member.account();
    let domain = in_transaction(services.db.as_ref(), |tx| {
        let mut domain = tx
            .find_sending_domain(account, id, true)?
            .ok_or(AppError::NotFound)?;
        let removed = domain
            .remove_selector(selector)
            .map_err(|refusal| match refusal {
                KeyRemovalRefused::Unknown => AppError::NotFound,
                KeyRemovalRefused::LastKey => AppError::BadRequest(refusal.to_string()),
            })?;
        tx.delete_dkim_key(account, id, removed.id)?;
        tx.record_domain_check(account, &domain)?;
        Ok(domain)
    })?;
    Ok(DomainView::new(services, domain))
}
