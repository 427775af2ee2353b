//! The public tracking endpoints' use cases: an open and a click, each counted the first
//! time only.

use mailroom_domain::message::StatsCounter;

use super::LinkToken;
use crate::{messages::count, ports::in_transaction, AppError, Services};

/// Records an open of the message `token` names: the first sets its `opened_at` and
/// counts `opened`, in one transaction; repeats change nothing. A token the server did
/// not mint, or of another kind, records nothing and is not an error: the pixel is
/// answered either way.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn record_open(services: &Services, token: &str) -> Result<(), AppError> {
    let Some(LinkToken::Open { account, message }) =
        LinkToken::decode(token, services.secrets.as_ref())
    else {
        return Ok(());
    };
    let now = services.clock.now();
    in_transaction(services.db.as_ref(), |tx| {
        if tx.mark_message_opened(account, message, now)? {
            count(tx, account, now, StatsCounter::Opened)?;
        }
        Ok(())
    })
}

/// The stored link a click token names; the first click of the message sets its
/// `clicked_at` and counts `clicked` in the same transaction.
///
/// # Errors
/// [`AppError::NotFound`] when the server did not mint the token (forged, tampered,
/// another kind) or the message or link is unknown; [`AppError`] when the store fails.
pub fn follow_click(services: &Services, token: &str) -> Result<String, AppError> {
    let Some(LinkToken::Click {
        account,
        message,
        position,
    }) = LinkToken::decode(token, services.secrets.as_ref())
    else {
        return Err(AppError::NotFound);
    };
    let now = services.clock.now();
    in_transaction(services.db.as_ref(), |tx| {
        let link = tx
            .message_link(account, message, position)?
            .ok_or(AppError::NotFound)?;
        if tx.mark_message_clicked(account, message, now)? {
            count(tx, account, now, StatsCounter::Clicked)?;
        }
        Ok(link)
    })
}

/// When a message was first opened and first clicked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Engagement {
    /// The first open (pixel fetched).
    pub opened_at: Option<mailroom_domain::Timestamp>,
    /// The first click of a tracked link.
    pub clicked_at: Option<mailroom_domain::Timestamp>,
}

/// The first open and first click of the account's message (`None`s when there were
/// none, or the message is unknown).
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn message_engagement(
    services: &Services,
    member: &crate::auth::Member,
    message: mailroom_domain::MessageId,
) -> Result<Engagement, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        let (opened_at, clicked_at) = tx.message_engagement(account, message)?;
        Ok(Engagement {
            opened_at,
            clicked_at,
        })
    })
}
