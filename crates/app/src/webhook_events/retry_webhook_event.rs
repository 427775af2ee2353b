use mailroom_domain::{
    webhook_event::{WebhookEvent, WebhookTarget},
    WebhookEventId,
};

use super::load_config;
use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// Re-queues a delivery: a new `queued` event with the same type, payload and time of the
/// change, `tryCount` 0, pointing back at `id` and naming the caller. Any event may be
/// retried, whatever its status; the original is left as it is, so its history stays.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown event (or another account's);
/// [`AppError`] when the store fails.
pub fn retry_webhook_event(
    services: &Services,
    member: &Member,
    id: WebhookEventId,
) -> Result<WebhookEvent, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        let original = tx
            .find_webhook_event(account, id)?
            .ok_or(AppError::NotFound)?;
        // The retry goes where the configuration points now; the original's target is the
        // best description left when there is none.
        let target = load_config(tx, services, account)?.map_or_else(
            || original.target.clone(),
            |config| WebhookTarget::of(&config),
        );
        let retry = original.retried(
            WebhookEventId::from_uuid(services.ids.next_uuid()),
            member.user_id(),
            target,
            services.clock.now(),
        );
        tx.insert_webhook_event(&retry)?;
        Ok(retry)
    })
}
