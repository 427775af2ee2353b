use mailroom_domain::account::Member;

use crate::{auth, ports::in_transaction, AppError, Services};

/// Every member of the account.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn list_members(services: &Services, member: &auth::Member) -> Result<Vec<Member>, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| Ok(tx.list_members(account)?))
}
