//! What `/metrics` reads from the database at scrape time: the outboxes' depth and lag,
//! and messages by status.

use mailroom_domain::{message::MessageStatus, Timestamp};

use crate::StoreError;

/// The state of one outbox (`messages` or `webhook_events`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct QueueDepth {
    /// Rows a worker will still handle (due or not, leased or not).
    pub pending: u64,
    /// Pending rows that are due and not leased: waiting for a worker now.
    pub due: u64,
    /// Seconds since the oldest of the `due` rows became due (0 when none is).
    pub oldest_due_age_secs: f64,
}

/// A snapshot for the metrics endpoint.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueStats {
    /// The message outbox.
    pub messages: QueueDepth,
    /// The webhook event outbox.
    pub webhook_events: QueueDepth,
    /// Messages by status, every status present (zero when none).
    pub messages_by_status: Vec<(MessageStatus, u64)>,
    /// Whether `messages_by_status` was counted (true) or, on a large table, estimated
    /// for the final statuses from the planner's statistics (false).
    pub message_counts_exact: bool,
    /// Mail servers (of all accounts) marked unhealthy: they refused Mailroom itself
    /// (AUTH) and their messages wait.
    pub unhealthy_mail_servers: u64,
}

/// Reads the snapshot. Every query must stay cheap on large tables: it runs on every
/// scrape.
pub trait QueueStatsRepository {
    /// The outboxes and message counts as of `now`.
    ///
    /// # Errors
    /// [`StoreError`] from the store.
    fn queue_stats(&mut self, now: Timestamp) -> Result<QueueStats, StoreError>;
}
