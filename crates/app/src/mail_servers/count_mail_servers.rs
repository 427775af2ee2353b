use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// How many mail servers the account holds.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn count_mail_servers(services: &Services, member: &Member) -> Result<u64, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.count_mail_servers(account)?)
    })
}
