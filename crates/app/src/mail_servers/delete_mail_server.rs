use mailroom_domain::{mail_server::MailServer, MailServerId};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// Deletes a mail server and returns it. Refused while templates prefer it (naming them),
/// so no template silently changes the server its mail goes through.
///
/// # Errors
/// [`AppError::BadRequest`] while in use; [`AppError::NotFound`] for an unknown server;
/// [`AppError`] when the store fails.
pub fn delete_mail_server(
    services: &Services,
    member: &Member,
    id: MailServerId,
) -> Result<MailServer, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        let record = tx
            .find_mail_server(account, id)?
            .ok_or(AppError::NotFound)?;
        let templates = tx.templates_preferring(account, id)?;
        if !templates.is_empty() {
            return Err(AppError::BadRequest(format!(
                "the mail server is the preferred server of templates ({}); change them first",
                templates.join(", ")
            )));
        }
        tx.delete_mail_server(account, id)?;
        Ok(record.server)
    })
}
