use mailroom_domain::{webhook_event::WebhookEvent, WebhookEventId};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// One webhook event of the account.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown event (or another account's);
/// [`AppError`] when the store fails.
pub fn get_webhook_event(
    services: &Services,
    member: &Member,
    id: WebhookEventId,
) -> Result<WebhookEvent, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        tx.find_webhook_event(account, id)?
            .ok_or(AppError::NotFound)
    })
}
