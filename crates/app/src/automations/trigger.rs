use mailroom_domain::{
    automation::TriggerCondition, slug::EventSlug, AccountId, ContactId, Timestamp,
};
use serde_json::Map;

use crate::{
    messages::outbox::{queued_message, sender_domain, Addressee, Origin},
    ports::UnitOfWork,
    AppError, Services,
};

/// Queues, in the caller's transaction (the event's), one message per enabled automation
/// that `slug` triggers for the contact: `everytime` always, `once` only when the contact
/// never fired it before (the store's unique key decides, also between concurrent
/// events). A delayed automation's message is due `timingValue` days after the event; the
/// worker checks then that the automation is still enabled and the contact still
/// eligible. Returns how many messages were queued.
///
/// # Errors
/// [`AppError`] when the store fails; the event rolls back with its messages.
pub(crate) fn queue_triggered_messages(
    tx: &mut dyn UnitOfWork,
    services: &Services,
    account: AccountId,
    contact: ContactId,
    email: &str,
    slug: &EventSlug,
    occurred_at: Timestamp,
) -> Result<usize, AppError> {
    let automations = tx.enabled_automations_for(account, slug)?;
    let mut queued = 0;
    for automation in automations
        .iter()
        .filter(|automation| automation.fires(slug))
    {
        if automation.settings.trigger_condition == TriggerCondition::Once
            && !tx.record_first_firing(account, automation.id, contact, occurred_at)?
        {
            continue;
        }
        let Some(template) = tx.find_template(account, automation.template_id)? else {
            // The foreign key keeps an automation's template alive; nothing to send.
            continue;
        };
        let domain = sender_domain(tx, account, &template)?;
        let message = queued_message(
            services,
            account,
            &template,
            &domain,
            &Addressee { contact, email },
            Origin::Automation(automation.id),
            Map::new(),
            occurred_at,
            automation.settings.timing.due_at(occurred_at),
        );
        tx.insert_message(&message, None)?;
        queued += 1;
    }
    Ok(queued)
}
