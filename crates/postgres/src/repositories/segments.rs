//! Audience queries: the contacts of a [`Segment`], as one SQL statement per call.
//!
//! The segment is compiled by [`sql`] into a `WHERE` clause over `contacts` with bound
//! parameters; the two queries here only add the projection, order and paging.

mod sql;

use diesel::{sql_types, QueryableByName, RunQueryDsl};
use mailroom_app::{
    ports::{AudienceBatch, QueuedAudience, SegmentRepository},
    StoreError,
};
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

/// One batch of an announcement's expansion in one statement (see
/// `AnnouncementRepository::queue_audience_batch`): the audience's next contacts in id
/// order (the primary key `(account_id, id)` serves the order and the resumption), each
/// paired with the next of the given message ids by its row number, inserted as queued
/// announcement messages; the unique key `(account_id, announcement_id, contact_id)`
/// leaves out contacts that already have one. Returns how many contacts the batch
/// reached, how many messages it inserted and the last contact.
pub(super) fn queue_audience_batch(
    conn: &mut diesel::PgConnection,
    batch: &AudienceBatch<'_>,
) -> Result<QueuedAudience, StoreError> {
    let mut sql = Sql::default();
    sql.push(
        "WITH audience AS MATERIALIZED (\
           SELECT contacts.id, contacts.email, \
                  row_number() OVER (ORDER BY contacts.id) AS n \
           FROM (SELECT contacts.id, contacts.email FROM contacts WHERE ",
    );
    push_segment_filter(&mut sql, batch.account, batch.segment);
    let until = sql.bind(Param::Timestamptz(batch.created_until.as_datetime()));
    sql.push(&format!(" AND contacts.created_at <= {until}"));
    if let Some(after) = batch.after {
        let after = sql.bind(Param::Uuid(after.as_uuid()));
        sql.push(&format!(" AND contacts.id > {after}"));
    }
    let ids: Vec<Uuid> = batch.message_ids.iter().map(|id| id.as_uuid()).collect();
    let limit = sql.bind(Param::BigInt(i64::try_from(ids.len()).unwrap_or(i64::MAX)));
    let ids = sql.bind(Param::UuidArray(ids));
    let account = sql.bind(Param::Uuid(batch.account.as_uuid()));
    let template = sql.bind(Param::Uuid(batch.template.as_uuid()));
    let announcement = sql.bind(Param::Uuid(batch.announcement.as_uuid()));
    let now = sql.bind(Param::Timestamptz(batch.now.as_datetime()));
    let domain = sql.bind(Param::Text(batch.message_id_domain.to_owned()));
    // The columns and values of `messages::outbox::queued_message` for an announcement;
    // the `Message-ID` is `message_id_header`'s `<id@domain>`.
    sql.push(&format!(
        " ORDER BY contacts.id LIMIT {limit}) AS contacts\
         ), \
         fresh AS (SELECT id, n FROM unnest({ids}::uuid[]) WITH ORDINALITY AS ids(id, n)), \
         inserted AS (\
           INSERT INTO messages (account_id, id, contact_id, email, template_id, kind, \
                                 status, data, attempts, next_attempt_at, message_id_header, \
                                 created_at, updated_at, announcement_id) \
           SELECT {account}, fresh.id, audience.id, audience.email, {template}, \
                  'announcement', 'queued', '{{}}'::jsonb, 0, {now}, \
                  '<' || fresh.id::text || '@' || {domain} || '>', {now}, {now}, {announcement} \
           FROM audience JOIN fresh USING (n) \
           ON CONFLICT ON CONSTRAINT messages_account_id_announcement_id_contact_id_key \
           DO NOTHING \
           RETURNING 1\
         ) \
         SELECT (SELECT count(*) FROM audience) AS contacts, \
                (SELECT count(*) FROM inserted) AS queued, \
                (SELECT id FROM audience ORDER BY n DESC LIMIT 1) AS last"
    ));
    let row: QueuedRow = sql.into_query().get_result(conn).map_err(store_error)?;
    Ok(QueuedAudience {
        contacts: u64::try_from(row.contacts).map_err(|e| corrupt("audience count", e))?,
        queued: u64::try_from(row.queued).map_err(|e| corrupt("queued count", e))?,
        last: row.last.map(ContactId::from_uuid),
    })
}

#[derive(QueryableByName)]
struct QueuedRow {
    #[diesel(sql_type = sql_types::BigInt)]
    contacts: i64,
    #[diesel(sql_type = sql_types::BigInt)]
    queued: i64,
    #[diesel(sql_type = sql_types::Nullable<sql_types::Uuid>)]
    last: Option<Uuid>,
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
