//! The suppression list and the accounts' address keys.

use diesel::{
    prelude::*,
    sql_types::{Bool, Bytea, Text, Uuid as SqlUuid},
};
use mailroom_app::{
    ports::{SealedSecret, SuppressionRepository},
    StoreError,
};
use mailroom_domain::{
    paging::PageRequest,
    suppression::{AddressHash, SuppressionEntry, SuppressionReason, SuppressionSource},
    AccountId, ContactId, Timestamp, TopicId,
};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{corrupt, templates::page_bounds, timestamp, PgUnitOfWork};
use crate::{
    error::store_error,
    prepared_sql::prepared_sql,
    schema::{suppression_keys, suppressions, topic_suppressions, topic_unsubscriptions},
};

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = suppressions, check_for_backend(diesel::pg::Pg))]
struct SuppressionRow {
    account_id: Uuid,
    address_hash: Vec<u8>,
    reason: String,
    source: String,
    email: Option<String>,
    detail: Option<String>,
    created_at: OffsetDateTime,
}

fn hash_of(bytes: &[u8]) -> Result<AddressHash, StoreError> {
    <[u8; 32]>::try_from(bytes)
        .map(AddressHash)
        .map_err(|_| corrupt("suppressions", "an address hash is not 32 bytes"))
}

fn reason_of(text: &str) -> Result<SuppressionReason, StoreError> {
    SuppressionReason::parse(text)
        .ok_or_else(|| corrupt("suppressions", format!("unknown reason {text:?}")))
}

impl SuppressionRow {
    fn new(account: AccountId, entry: &SuppressionEntry) -> Self {
        Self {
            account_id: account.as_uuid(),
            address_hash: entry.address_hash.0.to_vec(),
            reason: entry.reason.as_str().to_owned(),
            source: entry.source.as_str().to_owned(),
            email: entry.email.clone(),
            detail: entry.detail.clone(),
            created_at: entry.created_at.as_datetime(),
        }
    }

    fn into_entry(self) -> Result<SuppressionEntry, StoreError> {
        Ok(SuppressionEntry {
            address_hash: hash_of(&self.address_hash)?,
            reason: reason_of(&self.reason)?,
            source: SuppressionSource::parse(&self.source).ok_or_else(|| {
                corrupt("suppressions", format!("unknown source {:?}", self.source))
            })?,
            email: self.email,
            detail: self.detail,
            created_at: timestamp(self.created_at),
        })
    }
}

fn entries(rows: Vec<SuppressionRow>) -> Result<Vec<SuppressionEntry>, StoreError> {
    rows.into_iter().map(SuppressionRow::into_entry).collect()
}

fn reason_names(reasons: &[SuppressionReason]) -> Vec<&'static str> {
    reasons.iter().map(|reason| reason.as_str()).collect()
}

impl SuppressionRepository for PgUnitOfWork<'_> {
    fn suppression_key(&mut self, account: AccountId) -> Result<Option<SealedSecret>, StoreError> {
        suppression_keys::table
            .find(account.as_uuid())
            .select(suppression_keys::sealed_key)
            .first::<Vec<u8>>(self.conn)
            .optional()
            .map(|sealed| sealed.map(SealedSecret))
            .map_err(store_error)
    }

    fn insert_suppression_key(
        &mut self,
        account: AccountId,
        sealed: &SealedSecret,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        diesel::insert_into(suppression_keys::table)
            .values((
                suppression_keys::account_id.eq(account.as_uuid()),
                suppression_keys::sealed_key.eq(&sealed.0),
                suppression_keys::created_at.eq(now.as_datetime()),
            ))
            .on_conflict_do_nothing()
            .execute(self.conn)
            .map(|n| n > 0)
            .map_err(store_error)
    }

    fn add_suppressions(
        &mut self,
        account: AccountId,
        entries: &[SuppressionEntry],
    ) -> Result<u64, StoreError> {
        if entries.is_empty() {
            return Ok(0);
        }
        let rows: Vec<SuppressionRow> = entries
            .iter()
            .map(|entry| SuppressionRow::new(account, entry))
            .collect();
        diesel::insert_into(suppressions::table)
            .values(&rows)
            .on_conflict_do_nothing()
            .execute(self.conn)
            .map(|n| n as u64)
            .map_err(store_error)
    }

    fn suppression_reasons(
        &mut self,
        account: AccountId,
        hashes: &[AddressHash],
    ) -> Result<Vec<(AddressHash, SuppressionReason)>, StoreError> {
        let hashes: Vec<Vec<u8>> = hashes.iter().map(|hash| hash.0.to_vec()).collect();
        let rows: Vec<(Vec<u8>, String)> = suppressions::table
            .filter(suppressions::account_id.eq(account.as_uuid()))
            .filter(suppressions::address_hash.eq_any(hashes))
            .select((suppressions::address_hash, suppressions::reason))
            .load(self.conn)
            .map_err(store_error)?;
        rows.into_iter()
            .map(|(hash, reason)| Ok((hash_of(&hash)?, reason_of(&reason)?)))
            .collect()
    }

    fn list_suppressions(
        &mut self,
        account: AccountId,
        reason: Option<SuppressionReason>,
        page: PageRequest,
    ) -> Result<Vec<SuppressionEntry>, StoreError> {
        let (offset, limit) = page_bounds(page);
        let mut query = suppressions::table
            .filter(suppressions::account_id.eq(account.as_uuid()))
            .into_boxed();
        if let Some(reason) = reason {
            query = query.filter(suppressions::reason.eq(reason.as_str()));
        }
        let rows = query
            .order((
                suppressions::created_at.desc(),
                suppressions::address_hash.asc(),
                suppressions::reason.asc(),
            ))
            .offset(offset)
            .limit(limit)
            .select(SuppressionRow::as_select())
            .load(self.conn)
            .map_err(store_error)?;
        entries(rows)
    }

    fn suppressions_after(
        &mut self,
        account: AccountId,
        after: Option<(AddressHash, SuppressionReason)>,
        limit: u32,
    ) -> Result<Vec<SuppressionEntry>, StoreError> {
        // Reason names sort as the reasons do not, but any fixed order serves a key: the
        // primary key's (address_hash, reason) text order.
        let mut query = suppressions::table
            .filter(suppressions::account_id.eq(account.as_uuid()))
            .into_boxed();
        if let Some((hash, reason)) = after {
            let hash = hash.0.to_vec();
            query = query.filter(
                suppressions::address_hash
                    .gt(hash.clone())
                    .or(suppressions::address_hash
                        .eq(hash)
                        .and(suppressions::reason.gt(reason.as_str()))),
            );
        }
        let rows = query
            .order((suppressions::address_hash.asc(), suppressions::reason.asc()))
            .limit(i64::from(limit))
            .select(SuppressionRow::as_select())
            .load(self.conn)
            .map_err(store_error)?;
        entries(rows)
    }

    fn count_suppressions(
        &mut self,
        account: AccountId,
        reason: Option<SuppressionReason>,
    ) -> Result<u64, StoreError> {
        let mut query = suppressions::table
            .filter(suppressions::account_id.eq(account.as_uuid()))
            .into_boxed();
        if let Some(reason) = reason {
            query = query.filter(suppressions::reason.eq(reason.as_str()));
        }
        query
            .count()
            .get_result::<i64>(self.conn)
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(store_error)
    }

    fn find_suppressions(
        &mut self,
        account: AccountId,
        hash: AddressHash,
    ) -> Result<Vec<SuppressionEntry>, StoreError> {
        let rows = suppressions::table
            .filter(suppressions::account_id.eq(account.as_uuid()))
            .filter(suppressions::address_hash.eq(hash.0.to_vec()))
            .select(SuppressionRow::as_select())
            .load(self.conn)
            .map_err(store_error)?;
        let mut found = entries(rows)?;
        found.sort_by_key(|entry| entry.reason);
        Ok(found)
    }

    fn remove_suppressions(
        &mut self,
        account: AccountId,
        hash: AddressHash,
        reasons: &[SuppressionReason],
    ) -> Result<Vec<SuppressionEntry>, StoreError> {
        let rows = diesel::delete(
            suppressions::table
                .filter(suppressions::account_id.eq(account.as_uuid()))
                .filter(suppressions::address_hash.eq(hash.0.to_vec()))
                .filter(suppressions::reason.eq_any(reason_names(reasons))),
        )
        .returning(SuppressionRow::as_returning())
        .get_results(self.conn)
        .map_err(store_error)?;
        let mut removed = entries(rows)?;
        removed.sort_by_key(|entry| entry.reason);
        Ok(removed)
    }

    fn forget_suppressed_address(
        &mut self,
        account: AccountId,
        hash: AddressHash,
    ) -> Result<(), StoreError> {
        diesel::update(
            suppressions::table
                .filter(suppressions::account_id.eq(account.as_uuid()))
                .filter(suppressions::address_hash.eq(hash.0.to_vec())),
        )
        .set((
            suppressions::email.eq(None::<String>),
            suppressions::detail.eq(None::<String>),
        ))
        .execute(self.conn)
        .map(drop)
        .map_err(store_error)
    }

    fn clear_contact_marks(
        &mut self,
        account: AccountId,
        normalized_email: &str,
        reasons: &[SuppressionReason],
    ) -> Result<(), StoreError> {
        let clears = |reason| reasons.contains(&reason);
        prepared_sql(
            "UPDATE contacts SET \
               hard_bounced_at = CASE WHEN $3 THEN NULL ELSE hard_bounced_at END, \
               complaint_at = CASE WHEN $4 THEN NULL ELSE complaint_at END, \
               unsubscribed_at = CASE WHEN $5 THEN NULL ELSE unsubscribed_at END \
             WHERE account_id = $1 AND email_lower = $2 \
               AND (($3 AND hard_bounced_at IS NOT NULL) OR ($4 AND complaint_at IS NOT NULL) \
                    OR ($5 AND unsubscribed_at IS NOT NULL))",
        )
        .bind::<SqlUuid, _>(account.as_uuid())
        .bind::<Text, _>(normalized_email)
        .bind::<Bool, _>(clears(SuppressionReason::HardBounce))
        .bind::<Bool, _>(clears(SuppressionReason::Complaint))
        .bind::<Bool, _>(clears(SuppressionReason::Unsubscribe))
        .execute(self.conn)
        .map(drop)
        .map_err(store_error)
    }

    fn keep_topic_unsubscriptions(
        &mut self,
        account: AccountId,
        contact: ContactId,
        hash: AddressHash,
    ) -> Result<u64, StoreError> {
        // Both tables are distributed by account, so on Citus this runs on one shard.
        prepared_sql(
            "INSERT INTO topic_suppressions (account_id, address_hash, topic_id, created_at) \
             SELECT account_id, $3, topic_id, created_at FROM topic_unsubscriptions \
             WHERE account_id = $1 AND contact_id = $2 \
             ON CONFLICT DO NOTHING",
        )
        .bind::<SqlUuid, _>(account.as_uuid())
        .bind::<SqlUuid, _>(contact.as_uuid())
        .bind::<Bytea, _>(hash.0.to_vec())
        .execute(self.conn)
        .map(|n| n as u64)
        .map_err(store_error)
    }

    fn kept_topic_unsubscriptions(
        &mut self,
        account: AccountId,
        hashes: &[AddressHash],
    ) -> Result<Vec<(AddressHash, TopicId, Timestamp)>, StoreError> {
        if hashes.is_empty() {
            return Ok(Vec::new());
        }
        let hashes: Vec<Vec<u8>> = hashes.iter().map(|hash| hash.0.to_vec()).collect();
        let rows: Vec<(Vec<u8>, Uuid, OffsetDateTime)> = topic_suppressions::table
            .filter(topic_suppressions::account_id.eq(account.as_uuid()))
            .filter(topic_suppressions::address_hash.eq_any(hashes))
            .select((
                topic_suppressions::address_hash,
                topic_suppressions::topic_id,
                topic_suppressions::created_at,
            ))
            .load(self.conn)
            .map_err(store_error)?;
        rows.into_iter()
            .map(|(hash, topic, at)| {
                Ok((hash_of(&hash)?, TopicId::from_uuid(topic), timestamp(at)))
            })
            .collect()
    }

    fn restore_topic_unsubscriptions(
        &mut self,
        account: AccountId,
        restored: &[(ContactId, TopicId, Timestamp)],
        hashes: &[AddressHash],
    ) -> Result<(), StoreError> {
        if !restored.is_empty() {
            let rows: Vec<_> = restored
                .iter()
                .map(|(contact, topic, at)| {
                    (
                        topic_unsubscriptions::account_id.eq(account.as_uuid()),
                        topic_unsubscriptions::contact_id.eq(contact.as_uuid()),
                        topic_unsubscriptions::topic_id.eq(topic.as_uuid()),
                        topic_unsubscriptions::created_at.eq(at.as_datetime()),
                    )
                })
                .collect();
            diesel::insert_into(topic_unsubscriptions::table)
                .values(&rows)
                .on_conflict_do_nothing()
                .execute(self.conn)
                .map_err(store_error)?;
        }
        if hashes.is_empty() {
            return Ok(());
        }
        let hashes: Vec<Vec<u8>> = hashes.iter().map(|hash| hash.0.to_vec()).collect();
        diesel::delete(
            topic_suppressions::table
                .filter(topic_suppressions::account_id.eq(account.as_uuid()))
                .filter(topic_suppressions::address_hash.eq_any(hashes)),
        )
        .execute(self.conn)
        .map(drop)
        .map_err(store_error)
    }
}
