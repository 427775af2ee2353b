use mailroom_domain::SendingDomainId;

use super::DomainView;
use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// One sending domain of the account.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown domain.
pub fn get_domain(
    services: &Services,
    member: &Member,
    id: SendingDomainId,
) -> Result<DomainView, AppError> {
    let account = member.account();
    let domain = in_transaction(services.db.as_ref(), |tx| {
        tx.find_sending_domain(account, id, false)?
            .ok_or(AppError::NotFound)
    })?;
    Ok(DomainView::new(services, domain))
}
