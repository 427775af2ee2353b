//! Automations: CRUD and the trigger that queues their messages when a contact records an
//! event (docs/design.md#9-automations-and-announcements).

mod create_automation;
mod delete_automation;
mod get_automation;
mod list_automations;
mod trigger;
mod update_automation;

pub use create_automation::create_automation;
pub use delete_automation::delete_automation;
pub use get_automation::get_automation;
pub use list_automations::{count_automations, list_automations};
pub(crate) use trigger::queue_triggered_messages;
pub use update_automation::update_automation;

use mailroom_domain::{template::Template, AccountId, TemplateId};

use crate::{ports::UnitOfWork, AppError};

/// The template an automation body names, which must be the account's.
fn template_of_account(
    tx: &mut dyn UnitOfWork,
    account: AccountId,
    id: TemplateId,
) -> Result<Template, AppError> {
    tx.find_template(account, id)?.ok_or_else(|| {
        AppError::invalid("templateId", "must be the id of a template of this account")
    })
}
