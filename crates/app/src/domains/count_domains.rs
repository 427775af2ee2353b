use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// How many sending domains the account holds.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn count_domains(services: &Services, member: &Member) -> Result<u64, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.count_sending_domains(account)?)
    })
}
