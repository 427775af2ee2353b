use mailroom_domain::{webhook_event::WebhookEvent, AccountId, WebhookEventId};

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// One webhook event of the account.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown event (or another account's);
/// [`AppError::Unauthorized`] for a non-member.
pub fn get_webhook_event(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    id: WebhookEventId,
) -> Result<WebhookEvent, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        tx.find_webhook_event(account, id)?
            .ok_or(AppError::NotFound)
    })
}
