//! Audience queries: the contacts of a [`Segment`], as one SQL statement per call.
//!
//! The segment is compiled by [`sql`] into a `WHERE` clause over `contacts` with bound
//! parameters; the two queries here only add the projection, order and paging.

mod sql;

use diesel::{sql_types, QueryableByName, RunQueryDsl};
use mailroom_app::{ports::SegmentRepository, StoreError};
use mailroom_domain::{condition::Segment, paging::PageRequest, AccountId, ContactId};
use time::OffsetDateTime;
use uuid::Uuid;

use self::sql::{push_segment_filter, Param, Sql};
use super::{corrupt, templates::page_bounds, PgUnitOfWork};
use crate::error::store_error;

#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = sql_types::Uuid)]
    id: Uuid,
}

#[derive(QueryableByName)]
pub(super) struct MemberRow {
    #[diesel(sql_type = sql_types::Uuid)]
    pub(super) id: Uuid,
    #[diesel(sql_type = sql_types::Text)]
    pub(super) email: String,
}

/// Up to `limit` contacts of the segment created at or before `created_until`, with ids
/// after `after`, in id order: one batch of an announcement's expansion. The primary key
/// `(account_id, id)` serves the order and the resumption.
pub(super) fn audience_batch(
    conn: &mut diesel::PgConnection,
    account: AccountId,
    segment: &Segment,
    created_until: OffsetDateTime,
    after: Option<Uuid>,
    limit: u32,
) -> Result<Vec<MemberRow>, StoreError> {
    let mut sql = Sql::default();
    sql.push("SELECT contacts.id, contacts.email FROM contacts WHERE ");
    push_segment_filter(&mut sql, account, segment);
    let until = sql.bind(Param::Timestamptz(created_until));
    sql.push(&format!(" AND contacts.created_at <= {until}"));
    if let Some(after) = after {
        let after = sql.bind(Param::Uuid(after));
        sql.push(&format!(" AND contacts.id > {after}"));
    }
    let limit = sql.bind(Param::BigInt(i64::from(limit)));
    sql.push(&format!(" ORDER BY contacts.id LIMIT {limit}"));
    sql.into_query().load(conn).map_err(store_error)
}

#[derive(QueryableByName)]
struct CountRow {
    #[diesel(sql_type = sql_types::BigInt)]
    count: i64,
}

impl SegmentRepository for PgUnitOfWork<'_> {
    fn search_segment(
        &mut self,
        account: AccountId,
        segment: &Segment,
        page: PageRequest,
    ) -> Result<Vec<ContactId>, StoreError> {
        let (offset, limit) = page_bounds(page);
        let mut sql = Sql::default();
        sql.push("SELECT contacts.id FROM contacts WHERE ");
        push_segment_filter(&mut sql, account, segment);
        // Id order is stable for paging and lets an expansion resume after the last id.
        let offset = sql.bind(Param::BigInt(offset));
        let limit = sql.bind(Param::BigInt(limit));
        sql.push(&format!(
            " ORDER BY contacts.id OFFSET {offset} LIMIT {limit}"
        ));
        let rows: Vec<IdRow> = sql.into_query().load(self.conn).map_err(store_error)?;
        Ok(rows
            .into_iter()
            .map(|row| ContactId::from_uuid(row.id))
            .collect())
    }

    fn count_segment(&mut self, account: AccountId, segment: &Segment) -> Result<u64, StoreError> {
        let mut sql = Sql::default();
        sql.push("SELECT count(*) AS count FROM contacts WHERE ");
        push_segment_filter(&mut sql, account, segment);
        let row: CountRow = sql
            .into_query()
            .get_result(self.conn)
            .map_err(store_error)?;
        u64::try_from(row.count).map_err(|e| corrupt("segment count", e))
    }
}
