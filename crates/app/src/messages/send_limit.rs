//! The monthly per-account send limit (`MAILROOM_MONTHLY_SEND_LIMIT`), applied at claim
//! time: a message that would be sent once the account has used its month is `skipped`
//! with `free_limit_capped` instead (docs/design.md#8-delivery).
//!
//! "Sent this month" is the sum of the `sent` counter of the account's days in the
//! current UTC calendar month (at most 31 rows of `message_stats_daily`), read once per
//! account and claim, plus the messages this claim has already let through. So one claim
//! never overshoots. Messages other rounds hold in flight (`sending`, not yet counted) are
//! not counted: a message is never capped for a send that may still fail, and the
//! overshoot is bounded by what the other rounds have in flight at that moment (a batch
//! each). See docs/configuration.md.

use std::collections::HashMap;

use mailroom_domain::{
    message::{DailyStats, StatsCounter},
    AccountId, Timestamp,
};

use crate::{ports::UnitOfWork, StoreError};

/// The allowance of one claim: the limit, and per account what is already used.
#[derive(Debug)]
pub(super) struct MonthlySendLimit {
    limit: Option<u64>,
    used: HashMap<AccountId, u64>,
}

impl MonthlySendLimit {
    /// A fresh allowance for one claim; `None` is no limit.
    pub(super) fn new(limit: Option<u64>) -> Self {
        Self {
            limit,
            used: HashMap::new(),
        }
    }

    /// Whether one more message of `account` may go out in the month of `now`; a `true`
    /// counts it against the allowance for the rest of this claim.
    ///
    /// # Errors
    /// [`StoreError`] when this month's counters cannot be read.
    pub(super) fn admit(
        &mut self,
        tx: &mut dyn UnitOfWork,
        account: AccountId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let Some(limit) = self.limit else {
            return Ok(true);
        };
        let used = match self.used.get_mut(&account) {
            Some(used) => used,
            None => {
                let today = now.as_datetime().date();
                let days = tx.daily_stats(account, first_of_month(today), today)?;
                self.used.entry(account).or_insert(sent_in(&days))
            }
        };
        Ok(take_one(used, limit))
    }
}

/// Uses one unit of the allowance if any is left.
fn take_one(used: &mut u64, limit: u64) -> bool {
    if *used >= limit {
        return false;
    }
    *used += 1;
    true
}

fn first_of_month(day: time::Date) -> time::Date {
    day.replace_day(1).unwrap_or(day)
}

fn sent_in(days: &[DailyStats]) -> u64 {
    days.iter()
        .map(|day| day.get(StatsCounter::Sent))
        .fold(0, u64::saturating_add)
}

#[cfg(test)]
mod tests {
    use time::macros::date;

    use super::*;

    #[test]
    fn the_allowance_runs_out_at_the_limit_and_counts_what_it_admits() {
        let mut used = 1;
        let admitted: Vec<bool> = (0..4).map(|_| take_one(&mut used, 3)).collect();
        assert_eq!(admitted, [true, true, false, false]);
        assert_eq!(used, 3);
        let mut none = 0;
        assert!(!take_one(&mut none, 0), "a limit of 0 sends nothing");
    }

    #[test]
    fn the_month_starts_on_its_first_utc_day_and_sums_its_sent_counters() {
        assert_eq!(first_of_month(date!(2026 - 11 - 22)), date!(2026 - 11 - 01));
        assert_eq!(first_of_month(date!(2026 - 12 - 01)), date!(2026 - 12 - 01));
        let mut first = DailyStats::zero(date!(2026 - 11 - 01));
        first.set(StatsCounter::Sent, 2);
        first.set(StatsCounter::Failed, 7);
        let mut second = DailyStats::zero(date!(2026 - 11 - 20));
        second.set(StatsCounter::Sent, 5);
        assert_eq!(sent_in(&[first, second]), 7);
    }
}
