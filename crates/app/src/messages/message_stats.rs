use mailroom_domain::{
    message::{stats_window, DailyStats, STATS_DAYS},
    AccountId,
};
use time::Duration;

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// The account's counters for the [`STATS_DAYS`] UTC days ending today, oldest first, with
/// zero days included.
///
/// # Errors
/// [`AppError::Unauthorized`] for a non-member.
pub fn message_stats(
    services: &Services,
    actor: &Actor,
    account: AccountId,
) -> Result<Vec<DailyStats>, AppError> {
    let today = services.clock.now().as_datetime().date();
    let first = today - Duration::days(i64::from(STATS_DAYS) - 1);
    let stored = in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        Ok(tx.daily_stats(account, first, today)?)
    })?;
    Ok(stats_window(today, &stored))
}
