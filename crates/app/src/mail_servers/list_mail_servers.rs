use mailroom_domain::{mail_server::MailServer, paging::PageRequest};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// One page of the account's mail servers, oldest first.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn list_mail_servers(
    services: &Services,
    member: &Member,
    page: PageRequest,
) -> Result<Vec<MailServer>, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        Ok(tx
            .list_mail_servers(account, page)?
            .into_iter()
            .map(|record| record.server)
            .collect())
    })
}
