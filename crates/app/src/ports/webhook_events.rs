use mailroom_domain::{
    paging::PageRequest,
    webhook_event::{WebhookEvent, WebhookEventFilter},
    AccountId, Timestamp, Uuid, WebhookEventId,
};

use crate::StoreError;

/// A worker's claim on queued rows: until `until`, nobody else claims them, and only the
/// holder of `token` may record their outcome. A lease that runs out (the worker died or
/// hung) makes the rows claimable again; the old holder's late write is then refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// Identifies this claim.
    pub token: Uuid,
    /// When it runs out.
    pub until: Timestamp,
}

/// Webhook events (the outbox of webhook deliveries).
pub trait WebhookEventRepository {
    /// Stores a new event.
    ///
    /// # Errors
    /// [`StoreError::Duplicate`] when the id is taken.
    fn insert_webhook_event(&mut self, event: &WebhookEvent) -> Result<(), StoreError>;

    /// The event, if it is the account's.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_webhook_event(
        &mut self,
        account: AccountId,
        id: WebhookEventId,
    ) -> Result<Option<WebhookEvent>, StoreError>;

    /// One page of the account's events, oldest first.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn list_webhook_events(
        &mut self,
        account: AccountId,
        filter: &WebhookEventFilter,
        page: PageRequest,
    ) -> Result<Vec<WebhookEvent>, StoreError>;

    /// How many events the list shows over all pages.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn count_webhook_events(
        &mut self,
        account: AccountId,
        filter: &WebhookEventFilter,
    ) -> Result<u64, StoreError>;

    /// Locks up to `limit` due webhook lanes (accounts whose next event is due at `now`),
    /// earliest due first, leaving out `skip_accounts` (whose attempts in flight are at
    /// the claiming worker's bound) and lanes another claim holds (skipped, never waited
    /// for). The locks last until the transaction ends;
    /// [`Self::reschedule_webhook_lanes`] must run before it commits.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn lock_due_webhook_lanes(
        &mut self,
        now: Timestamp,
        limit: u32,
        skip_accounts: &[AccountId],
    ) -> Result<Vec<AccountId>, StoreError>;

    /// Claims up to `limit` pending events of `account` that are due at `now` and not
    /// leased (or whose lease ran out), earliest due first, and leases them with `lease`.
    /// Rows other workers hold locked are skipped, never waited for. `account` is in the
    /// statement's WHERE clause, so on a database distributed by account it runs on one
    /// shard.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn claim_due_webhook_events(
        &mut self,
        account: AccountId,
        now: Timestamp,
        lease: &Lease,
        limit: u32,
    ) -> Result<Vec<WebhookEvent>, StoreError>;

    /// Sets each of the `lanes` (accounts locked by [`Self::lock_due_webhook_lanes`],
    /// each with whether its claim took all it was allowed) due when the account next has
    /// something to claim: `now` for a lane whose claim was full, else its earliest
    /// waiting event or the end of a lease on one in flight, but not before `now`; no
    /// time when nothing waits.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn reschedule_webhook_lanes(
        &mut self,
        lanes: &[(AccountId, bool)],
        now: Timestamp,
    ) -> Result<(), StoreError>;

    /// Writes an attempt's outcome (status, counts, target, last answer, due time) and
    /// releases the lease, but only while `lease_token` still holds it; `false` when the
    /// lease was lost (it ran out and another worker claimed the event).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn record_webhook_attempt(
        &mut self,
        event: &WebhookEvent,
        lease_token: Uuid,
    ) -> Result<bool, StoreError>;
}
