//! The error every use case returns, and the error every repository returns.
//!
//! Policy: a client mistake is `Invalid`/`BadRequest` (400), `Unauthorized` (401), `Forbidden` (403) or
//! `NotFound` (404); a database that cannot be reached is `Unavailable` (503, the client
//! may retry), and so is a statement cancelled by the statement timeout (`TimedOut`);
//! anything else is `Internal` (500) and is a bug to fix, never an answer to
//! bad input.

use mailroom_domain::ValidationErrors;

/// Why a use case did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The input failed validation; each field error is reported.
    #[error("{0}")]
    Invalid(ValidationErrors),
    /// The request is not acceptable for a reason that belongs to no single field.
    #[error("{0}")]
    BadRequest(String),
    /// Missing, invalid, expired or revoked credentials, or no access to the account.
    #[error("unauthorized")]
    Unauthorized,
    /// The caller is known and may reach the account, but its token's scope or its role
    /// does not allow this; the message names what is missing.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// The record does not exist (or belongs to another account).
    #[error("not found")]
    NotFound,
    /// A dependency (the database) is unreachable; retrying later may succeed.
    #[error("service unavailable: {0}")]
    Unavailable(String),
    /// The part of the store that holds one account's rows cannot be reached, or its
    /// statement waited past the timeout (a Citus worker node is away, or a shard of the
    /// account is being moved): other accounts' work may go on. Answered like
    /// [`AppError::Unavailable`]; the workers leave the account out of their claims for a
    /// while instead of failing every claim on it.
    #[error("the store of account {0} is unavailable: {1}")]
    AccountUnavailable(mailroom_domain::AccountId, String),
    /// A statement ran past the transaction's statement timeout and was cancelled (503:
    /// the load may pass, or the client may narrow the request).
    #[error("statement timed out: {0}")]
    TimedOut(String),
    /// The caller has as much of something in flight as it may (previews rendering at
    /// once, say); retrying once one ends may succeed (429).
    #[error("too many at once: {0}")]
    TooManyAtOnce(String),
    /// An unexpected failure: a bug or a broken invariant.
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<ValidationErrors> for AppError {
    fn from(errors: ValidationErrors) -> Self {
        Self::Invalid(errors)
    }
}

impl AppError {
    /// A 400 for one field.
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        Self::Invalid(ValidationErrors::single(field, message))
    }
}

/// A value the store keeps unique that a write repeated, named by what it means: the use
/// case turns it into the caller's mistake (or, for an idempotency key, into a second
/// look). The adapter knows which of its rules is which; no use case names one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Duplicate {
    /// A template slug another template of the account has.
    #[error("template slug")]
    TemplateSlug,
    /// A topic name another topic of the account has (in any letters' case).
    #[error("topic name")]
    TopicName,
    /// A saved segment's name another segment of the account has (in any letters' case).
    #[error("segment name")]
    SegmentName,
    /// A sending domain the account has already.
    #[error("sending domain")]
    SendingDomainName,
    /// An `Idempotency-Key` another message of the account carries: a concurrent first
    /// use committed first.
    #[error("idempotency key")]
    IdempotencyKey,
    /// A user's email another user has (in any letters' case).
    #[error("user email")]
    UserEmail,
    /// Another unique rule, as the store names it (for the logs).
    #[error("{0}")]
    Other(String),
}

/// A reference the store keeps whole that a write or delete would break.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BrokenReference {
    /// A saved segment names the topic (deleting it), or the topic is gone (naming it).
    #[error("a saved segment's topic")]
    SegmentTopic,
    /// Another reference, as the store names it (for the logs).
    #[error("{0}")]
    Other(String),
}

/// Why a repository call failed. Adapters translate their driver's errors into these.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store cannot answer now, and the same work may succeed when run again: it
    /// cannot be reached (pool timeout, connection refused, server restarting), or the
    /// transaction met a concurrent change (a serialization failure; on Citus, a shard
    /// split or moved under it).
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The write repeats a value the store keeps unique.
    #[error("duplicate {0}")]
    Duplicate(Duplicate),
    /// The write or delete would break a reference the store keeps whole.
    #[error("broken reference: {0}")]
    BrokenReference(BrokenReference),
    /// The database cancelled a statement that ran past the statement timeout.
    #[error("statement timed out: {0}")]
    TimedOut(String),
    /// Stored data could not be read back into domain types.
    #[error("corrupt stored data: {0}")]
    Corrupt(String),
    /// Anything else.
    #[error("store failure: {0}")]
    Other(String),
}

impl StoreError {
    /// This error of a statement that reads or writes only `account`'s rows: a store that
    /// could not be reached, or a statement that timed out, is that account's
    /// ([`AppError::AccountUnavailable`]); anything else converts as usual.
    pub fn of_account(self, account: mailroom_domain::AccountId) -> AppError {
        match self {
            StoreError::Unavailable(reason) | StoreError::TimedOut(reason) => {
                AppError::AccountUnavailable(account, reason)
            }
            other => other.into(),
        }
    }
}

impl From<StoreError> for AppError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(reason) => Self::Unavailable(reason),
            // A use case checks what it refers to before it writes, so a reference it did
            // not expect broken was removed by a concurrent change between the check and
            // the write (a delete; on Citus, a shard split between two statements of the
            // transaction): run again, the check sees the change and answers for it.
            StoreError::BrokenReference(BrokenReference::Other(reference)) => Self::Unavailable(
                format!("a concurrent change broke the reference {reference}; try again"),
            ),
            StoreError::TimedOut(reason) => Self::TimedOut(reason),
            other => Self::Internal(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{AppError, BrokenReference, StoreError};

    #[test]
    fn an_unexpected_broken_reference_asks_for_another_try_and_an_expected_one_stays_itself() {
        let raced: AppError =
            StoreError::BrokenReference(BrokenReference::Other("events_contact".into())).into();
        assert!(matches!(raced, AppError::Unavailable(_)), "{raced:?}");
        let expected: AppError = StoreError::BrokenReference(BrokenReference::SegmentTopic).into();
        assert!(matches!(expected, AppError::Internal(_)), "{expected:?}");
    }
}
