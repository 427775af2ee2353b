use mailroom_domain::{
    webhook_event::{ContactNotice, WebhookEvent, WebhookTarget},
    WebhookEventId,
};

use crate::{accounts::open_webhook_config, ports::UnitOfWork, AppError, Services};

/// Writes the webhook event that reports `notice`, in the caller's transaction, when the
/// account's webhook configuration lists its type; returns the event's id, or `None` when
/// there is no configuration or the type is not listed.
///
/// Call it from the use case that makes the change (contact deleted, bounced, complained,
/// unsubscribed), inside the same transaction: the event then exists exactly when the
/// change was committed, and the delivery worker sends it later.
///
/// # Errors
/// [`AppError`] from the store, or [`AppError::Internal`] when the stored configuration's
/// secrets cannot be opened.
pub fn queue_webhook_event(
    tx: &mut dyn UnitOfWork,
    services: &Services,
    notice: &ContactNotice,
) -> Result<Option<WebhookEventId>, AppError> {
    let event_type = notice.event_type();
    let Some(stored) = tx.find_webhook_config(notice.account_id)? else {
        return Ok(None);
    };
    if !stored.events.contains(&event_type) {
        return Ok(None);
    }
    let config = open_webhook_config(services.secrets.as_ref(), notice.account_id, stored)?;
    let event = WebhookEvent::queued(
        WebhookEventId::from_uuid(services.ids.next_uuid()),
        notice.account_id,
        event_type,
        notice.payload(),
        WebhookTarget::of(&config),
        notice.occurred_at,
        services.clock.now(),
    );
    tx.insert_webhook_event(&event)?;
    Ok(Some(event.id))
}
