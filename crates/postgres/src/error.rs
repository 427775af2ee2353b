use diesel::result::{DatabaseErrorKind, Error as DieselError};
use mailroom_app::StoreError;

/// How PostgreSQL words the error of a statement cancelled by `statement_timeout`
/// (server messages are English unless `lc_messages` says otherwise).
const STATEMENT_TIMEOUT_MESSAGE: &str = "canceling statement due to statement timeout";

/// Translates a diesel error into the port's error vocabulary.
pub fn store_error(error: DieselError) -> StoreError {
    match error {
        DieselError::DatabaseError(kind, info) => {
            let constraint = info.constraint_name().unwrap_or("unknown").to_owned();
            match kind {
                DatabaseErrorKind::UniqueViolation => StoreError::UniqueViolation(constraint),
                DatabaseErrorKind::ForeignKeyViolation => {
                    StoreError::ForeignKeyViolation(constraint)
                }
                DatabaseErrorKind::ClosedConnection | DatabaseErrorKind::UnableToSendCommand => {
                    StoreError::Unavailable(info.message().to_owned())
                }
                // SQLSTATE 57014 (query_canceled); diesel does not expose the code, and
                // the message tells a statement timeout from a cancel request.
                _ if info.message().starts_with(STATEMENT_TIMEOUT_MESSAGE) => {
                    StoreError::TimedOut(info.message().to_owned())
                }
                _ => StoreError::Other(info.message().to_owned()),
            }
        }
        DieselError::BrokenTransactionManager => {
            StoreError::Unavailable("connection lost mid-transaction".into())
        }
        other => StoreError::Other(other.to_string()),
    }
}
