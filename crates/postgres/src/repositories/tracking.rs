//! Tracking (`message_tracking`) and a contact's own unsubscriptions.

use diesel::{
    prelude::*,
    sql_types::{Integer, Text, Timestamptz, Uuid as SqlUuid},
    upsert::excluded,
};
use mailroom_app::{
    ports::{SubscriptionRepository, TrackingRepository},
    StoreError,
};
use mailroom_domain::{AccountId, ContactId, MessageId, Timestamp, TopicId};
use time::OffsetDateTime;

use super::contacts::{record_latest_activity, set_contact_mark, ContactMark, LatestActivity};
use super::{timestamp, PgUnitOfWork};
use crate::{
    error::store_error,
    prepared_sql::prepared_sql,
    schema::{message_tracking, topic_unsubscriptions},
    upkeep::{add_to_counters, AccountCounters},
};

#[derive(QueryableByName)]
struct Link {
    #[diesel(sql_type = diesel::sql_types::Nullable<Text>)]
    link: Option<String>,
}

impl PgUnitOfWork<'_> {
    /// Sets `column` (a closed choice, never input) to `now` when unset; `true` only when
    /// this statement set it. Reading the message first makes an unknown message a no-op
    /// instead of a foreign-key error, and gives its announcement: a first open or click of
    /// an announcement's message counts in its counters, in the same transaction.
    fn mark_first(
        &mut self,
        column: &'static str,
        account: AccountId,
        message: MessageId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let marked = if self.on_citus {
            self.mark_first_in_steps(column, account, message, now)?
        } else {
            self.mark_first_in_one_statement(column, account, message, now)?
        };
        let Some(marked) = marked else {
            return Ok(false);
        };
        // The contact's latest first open or click, which engagement conditions on any
        // message read. A test send is not the contact's message.
        if !marked.test {
            let activity = match column {
                OPENED => LatestActivity::Opened,
                _ => LatestActivity::Clicked,
            };
            record_latest_activity(self.conn, account, marked.contact_id, activity, now)?;
        }
        if let Some(announcement) = marked.announcement_id {
            let mut counters = AccountCounters::default();
            match column {
                OPENED => counters.opened(announcement),
                _ => counters.clicked(announcement),
            }
            add_to_counters(self.conn, account.as_uuid(), &counters)?;
        }
        Ok(true)
    }

    /// The mark in one statement: the message read and the mark written in one round trip.
    fn mark_first_in_one_statement(
        &mut self,
        column: &'static str,
        account: AccountId,
        message: MessageId,
        now: Timestamp,
    ) -> Result<Option<Marked>, StoreError> {
        prepared_sql(format!(
            "WITH message AS (\
               SELECT account_id, id, announcement_id, contact_id, test FROM messages \
               WHERE account_id = $1 AND id = $2), \
             marked AS (\
               INSERT INTO message_tracking (account_id, message_id, {column}) \
               SELECT account_id, id, $3 FROM message \
               ON CONFLICT (account_id, message_id) DO UPDATE SET {column} = EXCLUDED.{column} \
               WHERE message_tracking.{column} IS NULL \
               RETURNING 1) \
             SELECT announcement_id, contact_id, test FROM message \
             WHERE EXISTS (SELECT 1 FROM marked)"
        ))
        .bind::<SqlUuid, _>(account.as_uuid())
        .bind::<SqlUuid, _>(message.as_uuid())
        .bind::<Timestamptz, _>(now.as_datetime())
        .get_result(self.conn)
        .optional()
        .map_err(store_error)
    }

    /// The mark as two routed statements, for Citus: there the one statement's WITH parts
    /// run as steps whose results are copied to every node (a round trip to each, and a
    /// failure for every tenant while any node is away).
    fn mark_first_in_steps(
        &mut self,
        column: &'static str,
        account: AccountId,
        message: MessageId,
        now: Timestamp,
    ) -> Result<Option<Marked>, StoreError> {
        let found: Option<Marked> = prepared_sql(
            "SELECT announcement_id, contact_id, test FROM messages \
                 WHERE account_id = $1 AND id = $2",
        )
        .bind::<SqlUuid, _>(account.as_uuid())
        .bind::<SqlUuid, _>(message.as_uuid())
        .get_result(self.conn)
        .optional()
        .map_err(store_error)?;
        let Some(found) = found else {
            return Ok(None);
        };
        #[derive(QueryableByName)]
        struct One {
            #[diesel(sql_type = Integer)]
            #[allow(dead_code)] // read only to learn that a row came back
            one: i32,
        }
        let marked = prepared_sql(format!(
            "INSERT INTO message_tracking (account_id, message_id, {column}) VALUES ($1, $2, $3) \
             ON CONFLICT (account_id, message_id) DO UPDATE SET {column} = EXCLUDED.{column} \
             WHERE message_tracking.{column} IS NULL \
             RETURNING 1 AS one"
        ))
        .bind::<SqlUuid, _>(account.as_uuid())
        .bind::<SqlUuid, _>(message.as_uuid())
        .bind::<Timestamptz, _>(now.as_datetime())
        .get_result::<One>(self.conn)
        .optional()
        .map_err(store_error)?;
        Ok(marked.map(|_| found))
    }
}

/// The column of a first open; a first click's is `clicked_at`.
const OPENED: &str = "opened_at";

/// A first open or click this statement set, with the message's announcement.
#[derive(QueryableByName)]
struct Marked {
    #[diesel(sql_type = diesel::sql_types::Nullable<SqlUuid>)]
    announcement_id: Option<uuid::Uuid>,
    #[diesel(sql_type = SqlUuid)]
    contact_id: uuid::Uuid,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    test: bool,
}

impl TrackingRepository for PgUnitOfWork<'_> {
    fn store_message_links(
        &mut self,
        account: AccountId,
        message: MessageId,
        links: &[String],
    ) -> Result<(), StoreError> {
        diesel::insert_into(message_tracking::table)
            .values((
                message_tracking::account_id.eq(account.as_uuid()),
                message_tracking::message_id.eq(message.as_uuid()),
                message_tracking::links.eq(links),
            ))
            .on_conflict((message_tracking::account_id, message_tracking::message_id))
            .do_update()
            .set(message_tracking::links.eq(excluded(message_tracking::links)))
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn message_link(
        &mut self,
        account: AccountId,
        message: MessageId,
        position: u16,
    ) -> Result<Option<String>, StoreError> {
        // Postgres arrays are 1-based; a position past the end reads NULL.
        let rows: Vec<Link> = prepared_sql(
            "SELECT links[$3 + 1] AS link FROM message_tracking \
             WHERE account_id = $1 AND message_id = $2",
        )
        .bind::<SqlUuid, _>(account.as_uuid())
        .bind::<SqlUuid, _>(message.as_uuid())
        .bind::<Integer, _>(i32::from(position))
        .load(self.conn)
        .map_err(store_error)?;
        Ok(rows.into_iter().next().and_then(|row| row.link))
    }

    fn mark_message_opened(
        &mut self,
        account: AccountId,
        message: MessageId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.mark_first(OPENED, account, message, now)
    }

    fn mark_message_clicked(
        &mut self,
        account: AccountId,
        message: MessageId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.mark_first("clicked_at", account, message, now)
    }

    fn message_engagement(
        &mut self,
        account: AccountId,
        message: MessageId,
    ) -> Result<(Option<Timestamp>, Option<Timestamp>), StoreError> {
        let row: Option<(Option<OffsetDateTime>, Option<OffsetDateTime>)> = message_tracking::table
            .find((account.as_uuid(), message.as_uuid()))
            .select((message_tracking::opened_at, message_tracking::clicked_at))
            .first(self.conn)
            .optional()
            .map_err(store_error)?;
        Ok(row.map_or((None, None), |(opened, clicked)| {
            (opened.map(timestamp), clicked.map(timestamp))
        }))
    }
}

impl SubscriptionRepository for PgUnitOfWork<'_> {
    fn unsubscribe_contact(
        &mut self,
        account: AccountId,
        contact: ContactId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        set_contact_mark(self.conn, account, contact, ContactMark::Unsubscribed, now)
    }

    fn unsubscribe_contact_from_topics(
        &mut self,
        account: AccountId,
        contact: ContactId,
        topics: &[TopicId],
        now: Timestamp,
    ) -> Result<Vec<TopicId>, StoreError> {
        if topics.is_empty() {
            return Ok(Vec::new());
        }
        let rows = topics
            .iter()
            .map(|topic| {
                (
                    topic_unsubscriptions::account_id.eq(account.as_uuid()),
                    topic_unsubscriptions::contact_id.eq(contact.as_uuid()),
                    topic_unsubscriptions::topic_id.eq(topic.as_uuid()),
                    topic_unsubscriptions::created_at.eq(now.as_datetime()),
                )
            })
            .collect::<Vec<_>>();
        diesel::insert_into(topic_unsubscriptions::table)
            .values(&rows)
            .on_conflict_do_nothing()
            .returning(topic_unsubscriptions::topic_id)
            .get_results::<uuid::Uuid>(self.conn)
            .map(|added| added.into_iter().map(TopicId::from_uuid).collect())
            .map_err(store_error)
    }
}
