use mailroom_domain::{mail_server::MailServer, MailServerId};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// One mail server of the account.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown server.
pub fn get_mail_server(
    services: &Services,
    member: &Member,
    id: MailServerId,
) -> Result<MailServer, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        tx.find_mail_server(account, id)?
            .map(|record| record.server)
            .ok_or(AppError::NotFound)
    })
}
