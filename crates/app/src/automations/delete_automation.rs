use mailroom_domain::{automation::Automation, AccountId, AutomationId};

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// Deletes an automation and returns it. Its messages stay in the log; those still
/// scheduled are skipped (`automation_disabled`) when they fall due.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown automation; [`AppError::Unauthorized`] for a
/// non-member.
pub fn delete_automation(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    id: AutomationId,
) -> Result<Automation, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        tx.delete_automation(account, id)?.ok_or(AppError::NotFound)
    })
}
