use mailroom_domain::{automation::Automation, AutomationId};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// Deletes an automation and returns it. Its messages stay in the log; those still
/// scheduled are skipped (`automation_disabled`) when they fall due.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown automation.
pub fn delete_automation(
    services: &Services,
    member: &Member,
    id: AutomationId,
) -> Result<Automation, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        tx.delete_automation(account, id)?.ok_or(AppError::NotFound)
    })
}
