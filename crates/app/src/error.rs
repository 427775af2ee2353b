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

/// Why a repository call failed. Adapters translate their driver's errors into these.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store cannot be reached (pool timeout, connection refused, server restarting).
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// A unique constraint refused the write; carries the constraint name.
    #[error("unique constraint {0} violated")]
    UniqueViolation(String),
    /// A foreign key refused the write or delete; carries the constraint name.
    #[error("foreign key {0} violated")]
    ForeignKeyViolation(String),
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
            StoreError::TimedOut(reason) => Self::TimedOut(reason),
            other => Self::Internal(other.to_string()),
        }
    }
}
