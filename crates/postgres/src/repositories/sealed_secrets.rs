//! The sealed columns, read in primary-key order and rewritten compare-and-swap, for key
//! rotation. Table and column names come from [`SealedColumn`], never from input.

use diesel::{
    pg::Pg,
    sql_query,
    sql_types::{BigInt, Binary, Nullable, Uuid as SqlUuid},
    QueryableByName, RunQueryDsl,
};
use mailroom_app::{
    ports::{SealedColumn, SealedRow, SealedRowKey, SealedSecret, SealedSecretRepository},
    StoreError,
};
use mailroom_domain::AccountId;
use uuid::Uuid;

use super::PgUnitOfWork;
use crate::error::store_error;

#[derive(QueryableByName)]
#[diesel(check_for_backend(Pg))]
struct Row {
    #[diesel(sql_type = SqlUuid)]
    account_id: Uuid,
    #[diesel(sql_type = Nullable<SqlUuid>)]
    record_id: Option<Uuid>,
    #[diesel(sql_type = Binary)]
    sealed: Vec<u8>,
}

/// (table, column, whether the table is keyed by `(account_id, id)`).
fn place(column: SealedColumn) -> (&'static str, &'static str, bool) {
    match column {
        SealedColumn::MailServerPassword => ("mail_servers", "password", true),
        SealedColumn::WebhookSigningSecret => ("webhook_configs", "signing_secret", false),
        SealedColumn::WebhookCredential => ("webhook_configs", "password_or_token", false),
        SealedColumn::DkimPrivateKey => ("sending_domain_keys", "private_key", true),
        SealedColumn::FeedbackSourceSigningKey => ("feedback_sources", "signing_key", true),
        SealedColumn::SuppressionKey => ("suppression_keys", "sealed_key", false),
    }
}

impl SealedSecretRepository for PgUnitOfWork<'_> {
    fn sealed_secrets_after(
        &mut self,
        column: SealedColumn,
        after: Option<SealedRowKey>,
        limit: u32,
    ) -> Result<Vec<SealedRow>, StoreError> {
        let (table, name, has_id) = place(column);
        let record_id = if has_id { "id" } else { "NULL::uuid" };
        let order = if has_id {
            "account_id, id"
        } else {
            "account_id"
        };
        // Start after the last key seen; at first after the nil UUID, which no id is
        // (ids are UUIDv7). Parameters a query does not use are allowed: their types are
        // sent with them.
        let after_account = after.map_or(Uuid::nil(), |key| key.account_id.as_uuid());
        let after_id = after.and_then(|key| key.record_id).unwrap_or(Uuid::nil());
        let position = if has_id {
            "(account_id, id) > ($1, $2)"
        } else {
            "account_id > $1"
        };
        let rows: Vec<Row> = sql_query(format!(
            "SELECT account_id, {record_id} AS record_id, {name} AS sealed FROM {table} \
             WHERE {name} IS NOT NULL AND {position} \
             ORDER BY {order} LIMIT $3"
        ))
        .bind::<SqlUuid, _>(after_account)
        .bind::<SqlUuid, _>(after_id)
        .bind::<BigInt, _>(i64::from(limit))
        .load(self.conn)
        .map_err(store_error)?;
        Ok(rows
            .into_iter()
            .map(|row| SealedRow {
                key: SealedRowKey {
                    account_id: AccountId::from_uuid(row.account_id),
                    record_id: row.record_id,
                },
                sealed: SealedSecret(row.sealed),
            })
            .collect())
    }

    fn replace_sealed_secret(
        &mut self,
        column: SealedColumn,
        key: SealedRowKey,
        expected: &SealedSecret,
        replacement: &SealedSecret,
    ) -> Result<bool, StoreError> {
        let (table, name, has_id) = place(column);
        let record = if has_id {
            "AND id = $4"
        } else {
            "AND $4 IS NULL"
        };
        let updated = sql_query(format!(
            "UPDATE {table} SET {name} = $1 \
             WHERE account_id = $2 AND {name} = $3 {record}"
        ))
        .bind::<Binary, _>(&replacement.0)
        .bind::<SqlUuid, _>(key.account_id.as_uuid())
        .bind::<Binary, _>(&expected.0)
        .bind::<Nullable<SqlUuid>, _>(key.record_id)
        .execute(self.conn)
        .map_err(store_error)?;
        Ok(updated == 1)
    }
}
