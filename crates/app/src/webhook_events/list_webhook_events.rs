use mailroom_domain::{
    paging::PageRequest,
    webhook_event::{WebhookEvent, WebhookEventFilter},
    AccountId,
};

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// One page of the account's webhook events, oldest first, filtered by status and type.
///
/// # Errors
/// [`AppError::Unauthorized`] for a non-member.
pub fn list_webhook_events(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    filter: &WebhookEventFilter,
    page: PageRequest,
) -> Result<Vec<WebhookEvent>, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        Ok(tx.list_webhook_events(account, filter, page)?)
    })
}

/// How many webhook events the list shows under the same filters.
///
/// # Errors
/// [`AppError::Unauthorized`] for a non-member.
pub fn count_webhook_events(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    filter: &WebhookEventFilter,
) -> Result<u64, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        Ok(tx.count_webhook_events(account, filter)?)
    })
}
