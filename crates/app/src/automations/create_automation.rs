use mailroom_domain::{
    automation::{Automation, AutomationInput},
    AutomationId,
};

use super::template_of_account;
use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// Creates an automation from a complete body.
///
/// # Errors
/// [`AppError::Invalid`] naming each bad field, including a `templateId` the account does
/// not have.
pub fn create_automation(
    services: &Services,
    member: &Member,
    input: AutomationInput,
) -> Result<Automation, AppError> {
    let account = member.account();
    let definition = input.parse()?;
    let automation = Automation {
        id: AutomationId::from_uuid(services.ids.next_uuid()),
        template_id: definition.template_id,
        settings: definition.settings,
        created_at: services.clock.now(),
    };
    in_transaction(services.db.as_ref(), |tx| {
        template_of_account(tx, account, automation.template_id)?;
        tx.insert_automation(
            account,
            automation.id,
            automation.template_id,
            &automation.settings,
            automation.created_at,
        )?;
        Ok(automation)
    })
}
