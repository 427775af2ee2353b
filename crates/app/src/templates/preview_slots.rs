//! What one account may run at once: previews, contact imports.
//!
//! A preview holds one of the API's blocking threads and one render child until its
//! render ends, at most the preview deadline later; an import holds a blocking thread
//! while its upload lasts. Without a bound per account, one member could start enough of
//! either to hold every preview child or blocking thread; with it, the member's further
//! ones answer 429 at once and other accounts' find room.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

use mailroom_domain::AccountId;

/// How many previews one account may have rendering at once, per API process.
pub const MAX_PREVIEWS_PER_ACCOUNT: usize = 2;

/// How many contact imports (API or console) one account may run at once, per API
/// process.
pub const MAX_IMPORTS_PER_ACCOUNT: usize = 2;

/// Work in flight per account, in this process, at most `limit` each.
#[derive(Debug)]
pub struct PreviewSlots {
    limit: usize,
    in_flight: Mutex<HashMap<AccountId, usize>>,
}

/// The same bound for another kind of work.
pub type AccountSlots = PreviewSlots;

impl Default for PreviewSlots {
    /// [`MAX_PREVIEWS_PER_ACCOUNT`] each.
    fn default() -> Self {
        Self::with_limit(MAX_PREVIEWS_PER_ACCOUNT)
    }
}

/// One account's preview in flight; the slot is given back when it is dropped.
#[derive(Debug)]
pub struct PreviewSlot {
    slots: Arc<PreviewSlots>,
    account: AccountId,
}

impl PreviewSlots {
    /// At most `limit` at once per account.
    pub fn with_limit(limit: usize) -> Self {
        Self {
            limit,
            in_flight: Mutex::new(HashMap::new()),
        }
    }

    /// The most each account may have in flight.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// A slot for one more of `account`, or `None` when it already has its limit in
    /// flight.
    pub fn enter(self: &Arc<Self>, account: AccountId) -> Option<PreviewSlot> {
        let mut in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let count = in_flight.entry(account).or_insert(0);
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        Some(PreviewSlot {
            slots: Arc::clone(self),
            account,
        })
    }

    /// How many previews of `account` are in flight.
    pub fn in_flight(&self, account: AccountId) -> usize {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&account)
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for PreviewSlot {
    fn drop(&mut self) {
        let mut in_flight = self
            .slots
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = in_flight.get_mut(&self.account) {
            *count -= 1;
            if *count == 0 {
                in_flight.remove(&self.account);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_gets_two_slots_and_another_account_its_own() {
        let slots = Arc::new(PreviewSlots::default());
        let busy = AccountId::from_uuid(mailroom_domain::Uuid::from_u128(1));
        let other = AccountId::from_uuid(mailroom_domain::Uuid::from_u128(2));
        let first = slots.enter(busy).expect("first");
        let second = slots.enter(busy).expect("second");
        assert!(slots.enter(busy).is_none(), "a third preview at once");
        let elsewhere = slots.enter(other).expect("another account's preview");
        drop(first);
        let third = slots.enter(busy).expect("a slot given back");
        drop((second, third, elsewhere));
        assert_eq!(slots.in_flight(busy), 0);
        assert!(slots.in_flight.lock().unwrap().is_empty());
    }
}
