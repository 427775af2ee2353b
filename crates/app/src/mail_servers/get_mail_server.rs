use mailroom_domain::{mail_server::MailServer, AccountId, MailServerId};

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// One mail server of the account.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown server; [`AppError::Unauthorized`] for a non-member.
pub fn get_mail_server(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    id: MailServerId,
) -> Result<MailServer, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        tx.find_mail_server(account, id)?
            .map(|record| record.server)
            .ok_or(AppError::NotFound)
    })
}
