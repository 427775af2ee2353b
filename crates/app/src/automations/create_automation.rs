use mailroom_domain::{
    automation::{Automation, AutomationInput},
    AccountId, AutomationId,
};

use super::template_of_account;
use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// Creates an automation from a complete body.
///
/// # Errors
/// [`AppError::Invalid`] naming each bad field, including a `templateId` the account does
/// not have; [`AppError::Unauthorized`] for a non-member.
pub fn create_automation(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    input: AutomationInput,
) -> Result<Automation, AppError> {
    let definition = input.parse()?;
    let automation = Automation {
        id: AutomationId::from_uuid(services.ids.next_uuid()),
        template_id: definition.template_id,
        settings: definition.settings,
        created_at: services.clock.now(),
    };
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
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
