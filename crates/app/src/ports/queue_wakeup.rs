//! Waking the delivery workers when messages are queued (docs/operations.md, "Waking the
//! workers: LISTEN/NOTIFY").

/// Tells every delivery worker, in this process and in others, that messages were queued
/// and are due now, so a transactional send does not wait for a worker's idle poll.
///
/// A hint, never a promise: the workers still poll (for work that becomes due by time,
/// and for hints that were lost), so a failed wake-up only delays mail by one poll.
pub trait QueueWakeup: Send + Sync {
    /// Called after the transaction that queued messages committed (a wake-up sent before
    /// the commit would find nothing to claim). Must not block: it hands the wake-up to
    /// the adapter, which coalesces those that arrive while one is under way.
    fn messages_queued(&self);
}

/// What a delivery worker hears from the wake-ups of [`QueueWakeup`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueEvent {
    /// The worker listens (again): it hears every wake-up from now on, so its idle poll
    /// can be long. Anything queued while it did not listen is due: look now.
    Listening,
    /// Messages were queued: look now.
    Queued,
    /// The worker stopped hearing wake-ups (the connection broke): poll as often as
    /// without them until it listens again.
    Deaf,
}
