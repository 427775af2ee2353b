use mailroom_domain::{mail_server::MailServer, paging::PageRequest, AccountId};

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// One page of the account's mail servers, oldest first.
///
/// # Errors
/// [`AppError::Unauthorized`] for a non-member.
pub fn list_mail_servers(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    page: PageRequest,
) -> Result<Vec<MailServer>, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        Ok(tx
            .list_mail_servers(account, page)?
            .into_iter()
            .map(|record| record.server)
            .collect())
    })
}
