use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// How many templates the account holds (the `/count` companion of the list).
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn count_templates(services: &Services, member: &Member) -> Result<u64, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| Ok(tx.count_templates(account)?))
}
