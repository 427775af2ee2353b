use mailroom_domain::{
    automation::{Automation, AutomationInput},
    AutomationId,
};

use super::template_of_account;
use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// Replaces an automation's settings with a complete body (there is no sparse patch).
/// Messages already scheduled keep their due time; they check when due whether the
/// automation is still enabled.
///
/// # Errors
/// [`AppError::Invalid`] naming each bad field; [`AppError::NotFound`] for an unknown
/// automation.
pub fn update_automation(
    services: &Services,
    member: &Member,
    id: AutomationId,
    input: AutomationInput,
) -> Result<Automation, AppError> {
    let account = member.account();
    let definition = input.parse()?;
    in_transaction(services.db.as_ref(), |tx| {
        let existing = tx.find_automation(account, id)?.ok_or(AppError::NotFound)?;
        template_of_account(tx, account, definition.template_id)?;
        if !tx.update_automation(account, id, definition.template_id, &definition.settings)? {
            return Err(AppError::NotFound);
        }
        Ok(Automation {
            id,
            template_id: definition.template_id,
            settings: definition.settings,
            created_at: existing.created_at,
        })
    })
}
