//! The previews one account may render at once.
//!
//! A preview holds one of the API's blocking threads and one render child until its
//! render ends, at most the preview deadline later. Without a bound per account, one
//! member could send enough previews of a slow template to hold every preview child and
//! every blocking thread; with it, the member's further previews answer 429 at once and
//! other accounts' previews find a child.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

use mailroom_domain::AccountId;

/// How many previews one account may have rendering at once, per API process.
pub const MAX_PREVIEWS_PER_ACCOUNT: usize = 2;

/// Previews in flight per account, in this process.
#[derive(Debug, Default)]
pub struct PreviewSlots {
    in_flight: Mutex<HashMap<AccountId, usize>>,
}

/// One account's preview in flight; the slot is given back when it is dropped.
#[derive(Debug)]
pub struct PreviewSlot {
    slots: Arc<PreviewSlots>,
    account: AccountId,
}

impl PreviewSlots {
    /// A slot for one more preview of `account`, or `None` when it already has
    /// [`MAX_PREVIEWS_PER_ACCOUNT`] in flight.
    pub fn enter(self: &Arc<Self>, account: AccountId) -> Option<PreviewSlot> {
        let mut in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let count = in_flight.entry(account).or_insert(0);
        if *count >= MAX_PREVIEWS_PER_ACCOUNT {
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
