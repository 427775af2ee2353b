use mailroom_domain::{
    paging::PageRequest,
    webhook_event::{WebhookEvent, WebhookEventFilter},
};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// One page of the account's webhook events, oldest first, filtered by status and type.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn list_webhook_events(
    services: &Services,
    member: &Member,
    filter: &WebhookEventFilter,
    page: PageRequest,
) -> Result<Vec<WebhookEvent>, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.list_webhook_events(account, filter, page)?)
    })
}

/// How many webhook events the list shows under the same filters.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn count_webhook_events(
    services: &Services,
    member: &Member,
    filter: &WebhookEventFilter,
) -> Result<u64, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.count_webhook_events(account, filter)?)
    })
}
