//! Audience queries: the contacts of a [`Segment`], as one SQL statement per call.
//!
//! The segment is compiled by [`sql`] into a `WHERE` clause over `contacts` with bound
//! parameters; the two queries here only add the projection, order and paging.

mod sql;

use diesel::{sql_types, QueryableByName, RunQueryDsl};
use mailroom_app::{ports::SegmentRepository, StoreError};
use mailroom_domain::{condition::Segment, paging::PageRequest, AccountId, ContactId};
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
