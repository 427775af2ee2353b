//! The monthly send limit (`MAILROOM_MONTHLY_SEND_LIMIT`), applied at claim time per
//! owner: a message that would be sent once the user who owns its account has used the
//! month, over every account they own, is `skipped` with `free_limit_capped` instead
//! (docs/design.md#8-delivery). Kept per owner, not per account, because any user can
//! make more accounts (up to `MAILROOM_MAX_ACCOUNTS_PER_USER`), and per account each would
//! bring a fresh allowance. The owner's total includes each of their accounts' own, so
//! the one check bounds both.
//!
//! "Sent this month" counts sends on the wire: each message to its contact and each Cc or
//! Bcc copy the server took (`monthly_sends`, written with the outcomes). The owner's total
//! is read once per owner and claim (one statement: the table is keyed by owner, on the
//! coordinator on Citus), plus one per message this claim has already let through. A
//! message's copies are known only once it is rendered and sent, so they count from its
//! outcome on: a claim may let through a message whose copies then pass the limit, by at
//! most one message's copies (`MAX_COPY_RECIPIENTS`, 100) per message in flight. Messages
//! other rounds hold in flight (not yet counted) are not counted either: a message is
//! never capped for a send that may still fail, and the overshoot is bounded by what the
//! other rounds have in flight at that moment (a batch each). See docs/configuration.md.

use std::collections::HashMap;

use mailroom_domain::{
    message::{DailyStats, StatsCounter},
    AccountId, Timestamp, UserId,
};

use crate::{ports::UnitOfWork, StoreError};

/// Whose allowance a message spends: its account's owner's, or (for an account without an
/// owner, which account creation never makes) the account's own, from its daily counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Spender {
    Owner(UserId),
    Account(AccountId),
}

/// The allowance of one claim: the limit, and per owner what is already used.
#[derive(Debug)]
pub(super) struct MonthlySendLimit {
    limit: Option<u64>,
    used: HashMap<Spender, u64>,
}

impl MonthlySendLimit {
    /// A fresh allowance for one claim; `None` is no limit.
    pub(super) fn new(limit: Option<u64>) -> Self {
        Self {
            limit,
            used: HashMap::new(),
        }
    }

    /// Whether one more message of `account` (owned by `owner`) may go out in the month
    /// of `now`; a `true` counts it against the allowance for the rest of this claim.
    ///
    /// # Errors
    /// [`StoreError`] when this month's counts cannot be read.
    pub(super) fn admit(
        &mut self,
        tx: &mut dyn UnitOfWork,
        account: AccountId,
        owner: Option<UserId>,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let Some(limit) = self.limit else {
            return Ok(true);
        };
        let spender = owner.map_or(Spender::Account(account), Spender::Owner);
        let used = match self.used.get_mut(&spender) {
            Some(used) => used,
            None => {
                let today = now.as_datetime().date();
                let month = first_of_month(today);
                let used = match spender {
                    Spender::Owner(owner) => tx.owner_monthly_sends(owner, month)?,
                    Spender::Account(account) => sent_in(&tx.daily_stats(account, month, today)?),
                };
                self.used.entry(spender).or_insert(used)
            }
        };
        Ok(take_one(used, limit))
    }
}

/// The first day of the UTC month of `now`: the month a send counts in.
pub(super) fn month_of(now: Timestamp) -> time::Date {
    first_of_month(now.as_datetime().date())
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
