use mailroom_domain::{sending_domain::MAX_SELECTORS, SendingDomainId};

use super::{new_key, DomainView};
use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// Adds a new DKIM key (a new selector) to the domain. It signs once its record is
/// published and a verify finds it; until then the older key goes on signing, and it
/// stays listed and checked until removed with [`super::remove_selector`].
///
/// # Errors
/// [`AppError::NotFound`] for an unknown domain; [`AppError::BadRequest`] when the domain
/// holds [`MAX_SELECTORS`] keys.
pub fn rotate_domain_key(
    services: &Services,
    member: &Member,
    id: SendingDomainId,
) -> Result<DomainView, AppError> {
    let account = member.account();
    let room = |keys: usize| {
        if keys >= MAX_SELECTORS {
            Err(AppError::BadRequest(format!(
                "the domain holds {MAX_SELECTORS} keys; remove an old selector first"
            )))
        } else {
            Ok(())
        }
    };
    in_transaction(services.db.as_ref(), |tx| {
        let domain = tx
            .find_sending_domain(account, id, false)?
            .ok_or(AppError::NotFound)?;
        room(domain.selectors.len())
    })?;
    let (key, sealed) = new_key(services, account)?;
    let domain = in_transaction(services.db.as_ref(), |tx| {
        let mut domain = tx
            .find_sending_domain(account, id, true)?
            .ok_or(AppError::NotFound)?;
        room(domain.selectors.len())?;
        tx.insert_dkim_key(account, id, &key, &sealed)?;
        domain.selectors.push(key.clone());
        Ok(domain)
    })?;
    Ok(DomainView::new(services, domain))
}
