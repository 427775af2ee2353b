use diesel::result::{DatabaseErrorKind, Error as DieselError};
use mailroom_app::{BrokenReference, Duplicate, StoreError};

/// How PostgreSQL words the error of a statement cancelled by `statement_timeout`
/// (server messages are English unless `lc_messages` says otherwise).
const STATEMENT_TIMEOUT_MESSAGE: &str = "canceling statement due to statement timeout";

/// How the server words the error of a statement that met a server going away (diesel
/// exposes no SQLSTATE): Citus could not reach a worker node (08006: stopped, restarting
/// or cut off), or a server ended the session for a shutdown (57P01, also passed on by
/// Citus from a worker) or a crash of one of its processes (57P02).
const SERVER_AWAY_MESSAGES: [&str; 4] = [
    "connection to the remote node ",
    "could not establish any connections to the node ",
    "terminating connection due to administrator command",
    "terminating connection because of crash of another server process",
];

/// Translates a diesel error into the port's error vocabulary.
pub fn store_error(error: DieselError) -> StoreError {
    match error {
        DieselError::DatabaseError(kind, info) => {
            let constraint = constraint_name(info.constraint_name(), info.message());
            match kind {
                DatabaseErrorKind::UniqueViolation => StoreError::Duplicate(duplicate(constraint)),
                DatabaseErrorKind::ForeignKeyViolation => {
                    StoreError::BrokenReference(broken_reference(constraint))
                }
                DatabaseErrorKind::ClosedConnection | DatabaseErrorKind::UnableToSendCommand => {
                    StoreError::Unavailable(info.message().to_owned())
                }
                // SQLSTATE 40001: the transaction met a concurrent change and must be run
                // again. Citus answers it for a statement whose shard a split moved while
                // it waited ("shard for the given value does not exist").
                DatabaseErrorKind::SerializationFailure => {
                    StoreError::Unavailable(info.message().to_owned())
                }
                _ if SERVER_AWAY_MESSAGES
                    .iter()
                    .any(|start| info.message().starts_with(start)) =>
                {
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

/// What the unique rule `constraint` (the schema's name) keeps unique.
fn duplicate(constraint: String) -> Duplicate {
    match constraint.as_str() {
        "templates_account_id_slug_key" => Duplicate::TemplateSlug,
        "topics_account_id_name_key" => Duplicate::TopicName,
        "segments_account_id_name_key" => Duplicate::SegmentName,
        "sending_domains_account_id_name_key" => Duplicate::SendingDomainName,
        "messages_account_id_idempotency_key_key" => Duplicate::IdempotencyKey,
        "users_email_lower_key" => Duplicate::UserEmail,
        _ => Duplicate::Other(constraint),
    }
}

/// What the foreign key `constraint` (the schema's name) keeps whole.
fn broken_reference(constraint: String) -> BrokenReference {
    match constraint.as_str() {
        "segments_topic_fkey" => BrokenReference::SegmentTopic,
        _ => BrokenReference::Other(constraint),
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
    use super::{constraint_name, store_error};
    use diesel::result::{DatabaseErrorKind, Error as DieselError};
    use mailroom_app::{BrokenReference, Duplicate, StoreError};

    fn database_error(message: &str) -> DieselError {
        DieselError::DatabaseError(DatabaseErrorKind::Unknown, Box::new(message.to_owned()))
    }

    #[test]
    fn a_server_or_citus_node_going_away_is_an_unavailable_store() {
        for message in [
            "terminating connection due to administrator command",
            "connection to the remote node postgres@127.0.0.1:55443 failed with the following \
             error: Connection refused",
            "could not establish any connections to the node 127.0.0.1:55443 after 30000 ms",
        ] {
            assert!(
                matches!(
                    store_error(database_error(message)),
                    StoreError::Unavailable(_)
                ),
                "{message}"
            );
        }
        assert!(matches!(
            store_error(database_error("relation \"nowhere\" does not exist")),
            StoreError::Other(_)
        ));
    }

    #[test]
    fn a_transaction_that_met_a_concurrent_change_is_worth_another_try() {
        let moved = DieselError::DatabaseError(
            DatabaseErrorKind::SerializationFailure,
            Box::new("shard for the given value does not exist".to_owned()),
        );
        assert!(matches!(store_error(moved), StoreError::Unavailable(_)));
    }

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

    #[test]
    fn a_broken_rule_is_named_by_what_it_keeps_and_never_by_its_constraint() {
        let refused = |kind, message: &str| {
            store_error(DieselError::DatabaseError(
                kind,
                Box::new(message.to_owned()),
            ))
        };
        assert!(matches!(
            refused(
                DatabaseErrorKind::UniqueViolation,
                "duplicate key value violates unique constraint \"topics_account_id_name_key_102008\""
            ),
            StoreError::Duplicate(Duplicate::TopicName)
        ));
        assert!(matches!(
            refused(
                DatabaseErrorKind::UniqueViolation,
                "duplicate key value violates unique constraint \"messages_account_id_idempotency_key_key\""
            ),
            StoreError::Duplicate(Duplicate::IdempotencyKey)
        ));
        assert!(matches!(
            refused(
                DatabaseErrorKind::ForeignKeyViolation,
                "update or delete on table \"topics\" violates foreign key constraint \"segments_topic_fkey\""
            ),
            StoreError::BrokenReference(BrokenReference::SegmentTopic)
        ));
        assert!(matches!(
            refused(
                DatabaseErrorKind::UniqueViolation,
                "duplicate key value violates unique constraint \"contacts_pkey\""
            ),
            StoreError::Duplicate(Duplicate::Other(name)) if name == "contacts_pkey"
        ));
    }
}
