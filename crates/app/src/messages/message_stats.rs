use mailroom_domain::message::{stats_window, DailyStats, STATS_DAYS};
use time::Duration;

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// The account's counters for the [`STATS_DAYS`] UTC days ending today, oldest first, with
/// zero days included.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn message_stats(services: &Services, member: &Member) -> Result<Vec<DailyStats>, AppError> {
    let account = member.account();
    let today = services.clock.now().as_datetime().date();
    let first = today - Duration::days(i64::from(STATS_DAYS) - 1);
    let stored = in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.daily_stats(account, first, today)?)
    })?;
    Ok(stats_window(today, &stored))
}
