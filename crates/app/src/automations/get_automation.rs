use mailroom_domain::{automation::Automation, AccountId, AutomationId};

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// One automation.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown automation; [`AppError::Unauthorized`] for a
/// non-member.
pub fn get_automation(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    id: AutomationId,
) -> Result<Automation, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        tx.find_automation(account, id)?.ok_or(AppError::NotFound)
    })
}
