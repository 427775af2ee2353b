use diesel::prelude::*;
use mailroom_app::{ports::SavedSegmentRepository, StoreError};
use mailroom_domain::{
    condition::AudienceDefinition, paging::PageRequest, saved_segment::SavedSegment, AccountId,
    SegmentId, TopicId,
};
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use super::{
    announcements::{conditions_from_json, conditions_json},
    templates::page_bounds,
    timestamp, PgUnitOfWork,
};
use crate::{error::store_error, schema::segments};

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = segments, check_for_backend(diesel::pg::Pg))]
struct SegmentRow {
    account_id: Uuid,
    id: Uuid,
    name: String,
    attributes: Value,
    include_unsubscribed: bool,
    topic_id: Option<Uuid>,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
}

impl SegmentRow {
    fn new(account: AccountId, segment: &SavedSegment) -> Self {
        Self {
            account_id: account.as_uuid(),
            id: segment.id.as_uuid(),
            name: segment.name.clone(),
            attributes: conditions_json(&segment.definition.attributes),
            include_unsubscribed: segment.definition.include_unsubscribed,
            topic_id: segment.definition.topic.map(|id| id.as_uuid()),
            created_at: segment.created_at.as_datetime(),
            updated_at: segment.updated_at.as_datetime(),
        }
    }

    fn into_segment(self) -> Result<SavedSegment, StoreError> {
        Ok(SavedSegment {
            id: SegmentId::from_uuid(self.id),
            name: self.name,
            definition: AudienceDefinition {
                attributes: conditions_from_json("segments.attributes", &self.attributes)?,
                include_unsubscribed: self.include_unsubscribed,
                topic: self.topic_id.map(TopicId::from_uuid),
            },
            created_at: timestamp(self.created_at),
            updated_at: timestamp(self.updated_at),
        })
    }
}

impl SavedSegmentRepository for PgUnitOfWork<'_> {
    fn list_saved_segments(
        &mut self,
        account: AccountId,
        page: PageRequest,
    ) -> Result<Vec<SavedSegment>, StoreError> {
        let (offset, limit) = page_bounds(page);
        segments::table
            .filter(segments::account_id.eq(account.as_uuid()))
            .order((segments::created_at.asc(), segments::id.asc()))
            .offset(offset)
            .limit(limit)
            .select(SegmentRow::as_select())
            .load(self.conn)
            .map_err(store_error)?
            .into_iter()
            .map(SegmentRow::into_segment)
            .collect()
    }

    fn count_saved_segments(&mut self, account: AccountId) -> Result<u64, StoreError> {
        segments::table
            .filter(segments::account_id.eq(account.as_uuid()))
            .count()
            .get_result::<i64>(self.conn)
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(store_error)
    }

    fn lock_and_count_saved_segments(&mut self, account: AccountId) -> Result<u64, StoreError> {
        // An advisory lock of the account's segment creations, as account creations take
        // one per owner: other accounts never wait, and no row of `accounts` is locked.
        crate::prepared_sql::prepared_sql(
            "SELECT pg_advisory_xact_lock(hashtextextended('account segments ' || $1::text, 0))",
        )
        .bind::<diesel::sql_types::Uuid, _>(account.as_uuid())
        .execute(self.conn)
        .map_err(store_error)?;
        self.count_saved_segments(account)
    }

    fn find_saved_segment(
        &mut self,
        account: AccountId,
        id: SegmentId,
    ) -> Result<Option<SavedSegment>, StoreError> {
        segments::table
            .find((account.as_uuid(), id.as_uuid()))
            .select(SegmentRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(store_error)?
            .map(SegmentRow::into_segment)
            .transpose()
    }

    fn insert_saved_segment(
        &mut self,
        account: AccountId,
        segment: &SavedSegment,
    ) -> Result<(), StoreError> {
        diesel::insert_into(segments::table)
            .values(SegmentRow::new(account, segment))
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn update_saved_segment(
        &mut self,
        account: AccountId,
        segment: &SavedSegment,
    ) -> Result<(), StoreError> {
        let row = SegmentRow::new(account, segment);
        diesel::update(segments::table.find((row.account_id, row.id)))
            .set((
                segments::name.eq(row.name),
                segments::attributes.eq(row.attributes),
                segments::include_unsubscribed.eq(row.include_unsubscribed),
                segments::topic_id.eq(row.topic_id),
                segments::updated_at.eq(row.updated_at),
            ))
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn saved_segments_naming_topic(
        &mut self,
        account: AccountId,
        topic: TopicId,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        segments::table
            .filter(segments::account_id.eq(account.as_uuid()))
            .filter(segments::topic_id.eq(topic.as_uuid()))
            .order(segments::name.asc())
            .limit(i64::from(limit))
            .select(segments::name)
            .load(self.conn)
            .map_err(store_error)
    }

    fn delete_saved_segment(
        &mut self,
        account: AccountId,
        id: SegmentId,
    ) -> Result<bool, StoreError> {
        diesel::delete(segments::table.find((account.as_uuid(), id.as_uuid())))
            .execute(self.conn)
            .map(|n| n > 0)
            .map_err(store_error)
    }
}
