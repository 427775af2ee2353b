use mailroom_domain::{automation::Automation, AutomationId};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// One automation.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown automation.
pub fn get_automation(
    services: &Services,
    member: &Member,
    id: AutomationId,
) -> Result<Automation, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        tx.find_automation(account, id)?.ok_or(AppError::NotFound)
    })
}
