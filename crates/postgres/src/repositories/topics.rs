use diesel::prelude::*;
use mailroom_app::{ports::TopicRepository, StoreError};
use mailroom_domain::{paging::PageRequest, topic::Topic, AccountId, TopicId};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{templates::page_bounds, timestamp, PgUnitOfWork};
use crate::{error::store_error, schema::topics};

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = topics, check_for_backend(diesel::pg::Pg))]
struct TopicRow {
    account_id: Uuid,
    id: Uuid,
    name: String,
    description: Option<String>,
    created_at: OffsetDateTime,
}

impl From<TopicRow> for Topic {
    fn from(row: TopicRow) -> Self {
        Self {
            id: TopicId::from_uuid(row.id),
            name: row.name,
            description: row.description,
            created_at: timestamp(row.created_at),
        }
    }
}

impl TopicRepository for PgUnitOfWork<'_> {
    fn list_topics(
        &mut self,
        account: AccountId,
        page: PageRequest,
    ) -> Result<Vec<Topic>, StoreError> {
        let (offset, limit) = page_bounds(page);
        topics::table
            .filter(topics::account_id.eq(account.as_uuid()))
            .order((topics::created_at.asc(), topics::id.asc()))
            .offset(offset)
            .limit(limit)
            .select(TopicRow::as_select())
            .load(self.conn)
            .map(|rows| rows.into_iter().map(Topic::from).collect())
            .map_err(store_error)
    }

    fn count_topics(&mut self, account: AccountId) -> Result<u64, StoreError> {
        topics::table
            .filter(topics::account_id.eq(account.as_uuid()))
            .count()
            .get_result::<i64>(self.conn)
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(store_error)
    }

    fn find_topic(&mut self, account: AccountId, id: TopicId) -> Result<Option<Topic>, StoreError> {
        topics::table
            .find((account.as_uuid(), id.as_uuid()))
            .select(TopicRow::as_select())
            .first(self.conn)
            .optional()
            .map(|row| row.map(Topic::from))
            .map_err(store_error)
    }

    fn insert_topic(&mut self, account: AccountId, topic: &Topic) -> Result<(), StoreError> {
        diesel::insert_into(topics::table)
            .values(TopicRow {
                account_id: account.as_uuid(),
                id: topic.id.as_uuid(),
                name: topic.name.clone(),
                description: topic.description.clone(),
                created_at: topic.created_at.as_datetime(),
            })
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn update_topic(&mut self, account: AccountId, topic: &Topic) -> Result<(), StoreError> {
        diesel::update(topics::table.find((account.as_uuid(), topic.id.as_uuid())))
            .set((
                topics::name.eq(&topic.name),
                topics::description.eq(topic.description.as_deref()),
            ))
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn delete_topic(&mut self, account: AccountId, id: TopicId) -> Result<bool, StoreError> {
        // Forms stop naming it, so none subscribes to a topic that is gone.
        crate::prepared_sql::prepared_sql(
            "UPDATE forms SET topic_ids = array_remove(topic_ids, $2) \
             WHERE account_id = $1 AND $2 = ANY (topic_ids)",
        )
        .bind::<diesel::sql_types::Uuid, _>(account.as_uuid())
        .bind::<diesel::sql_types::Uuid, _>(id.as_uuid())
        .execute(self.conn)
        .map_err(store_error)?;
        diesel::delete(topics::table.find((account.as_uuid(), id.as_uuid())))
            .execute(self.conn)
            .map(|n| n > 0)
            .map_err(store_error)
    }
}
