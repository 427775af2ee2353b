use diesel::result::{DatabaseErrorKind, Error as DieselError};
use mailroom_app::StoreError;

/// How PostgreSQL words the error of a statement cancelled by `statement_timeout`
/// (server messages are English unless `lc_messages` says otherwise).
const STATEMENT_TIMEOUT_MESSAGE: &str = "canceling statement due to statement timeout";

/// Translates a diesel error into the port's error vocabulary.
pub fn store_error(error: DieselError) -> StoreError {
    match error {
        DieselError::DatabaseError(kind, info) => {
            let constraint = constraint_name(info.constraint_name(), info.message());
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

/// The schema's name of the constraint an error names. On Citus the error comes from a
/// worker: it names the shard's copy (`name_102008`) in its message and carries no
/// constraint field, so the name is read from the message and the shard's suffix
/// dropped.
fn constraint_name(field: Option<&str>, message: &str) -> String {
    let named = field.map(str::to_owned).or_else(|| {
        let (_, rest) = message.split_once("constraint \"")?;
        rest.split_once('"').map(|(name, _)| name.to_owned())
    });
    let Some(name) = named else {
        return "unknown".to_owned();
    };
    match name.rsplit_once('_') {
        Some((base, shard)) if shard.len() >= 6 && shard.bytes().all(|b| b.is_ascii_digit()) => {
            base.to_owned()
        }
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::constraint_name;

    #[test]
    fn a_shards_constraint_is_named_as_the_schema_names_it() {
        assert_eq!(
            constraint_name(
                None,
                "duplicate key value violates unique constraint \"sending_domains_account_id_domain_key_102137\""
            ),
            "sending_domains_account_id_domain_key"
        );
        assert_eq!(
            constraint_name(Some("contacts_pkey"), "duplicate key value"),
            "contacts_pkey"
        );
        assert_eq!(constraint_name(None, "something else"), "unknown");
        assert_eq!(constraint_name(Some("tokens_key_v2"), ""), "tokens_key_v2");
    }
}
