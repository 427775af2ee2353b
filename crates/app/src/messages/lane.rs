//! The lane: the unit of the message worker's send concurrency, which the claim hands out
//! and the delivery reports back.

use mailroom_domain::{AccountId, MailServerId};

/// The mail server a message goes through: the unit of the worker's send concurrency, so
/// one slow server only fills its own lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lane {
    /// The account the server belongs to.
    pub account: AccountId,
    /// The server.
    pub server: MailServerId,
}
