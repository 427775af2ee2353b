use mailroom_domain::paging::PageRequest;

use super::DomainView;
use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// One page of the account's sending domains, oldest first.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn list_domains(
    services: &Services,
    member: &Member,
    page: PageRequest,
) -> Result<Vec<DomainView>, AppError> {
    let account = member.account();
    let domains = in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.list_sending_domains(account, page)?)
    })?;
    Ok(domains
        .into_iter()
        .map(|domain| DomainView::new(services, domain))
        .collect())
}
