use diesel::{pg::Pg, prelude::*, sql_types::Timestamptz};
use mailroom_app::{
    ports::{AnnouncementRepository, AudienceBatch, QueuedAudience},
    StoreError,
};
use mailroom_domain::{
    announcement::{Announcement, AnnouncementCounters, AnnouncementStatus},
    condition::ConditionInput,
    message::{MessageStatus, SkipReason},
    paging::PageRequest,
    AccountId, AnnouncementId, ContactId, SegmentId, TemplateId, Timestamp, TopicId,
};
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use super::{
    corrupt, segments::queue_audience_batch, templates::page_bounds, timestamp, PgUnitOfWork,
};
use crate::{
    error::store_error,
    prepared_sql::prepared_sql,
    schema::announcements,
    upkeep::{add_to_counters, bring_lanes_forward, AccountCounters, Lanes},
};

/// The summed slots of one announcement's counters.
#[derive(QueryableByName)]
struct CounterSums {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    queued: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    sending: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    sent: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    failed: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    bounced: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    skipped: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    opened: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    clicked: i64,
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = announcements, check_for_backend(Pg))]
struct AnnouncementRow {
    account_id: Uuid,
    id: Uuid,
    name: String,
    template_id: Uuid,
    subject: String,
    topic_id: Option<Uuid>,
    include_unsubscribed: bool,
    attributes: Value,
    status: String,
    last_sampled_contact_id: Option<Uuid>,
    expanded_at: Option<OffsetDateTime>,
    audience_size: i64,
    process_date: Option<OffsetDateTime>,
    failure_reason: Option<String>,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
    segment_id: Option<Uuid>,
    send_at: Option<OffsetDateTime>,
}

/// Conditions as the `attributes` columns keep them (of announcements and segments): the
/// JSON array the API shows.
pub(super) fn conditions_json(conditions: &[ConditionInput]) -> Value {
    Value::Array(conditions.iter().map(ConditionInput::to_json).collect())
}

/// Reads back what [`conditions_json`] wrote into `column`.
pub(super) fn conditions_from_json(
    column: &str,
    value: &Value,
) -> Result<Vec<ConditionInput>, StoreError> {
    match value {
        Value::Array(items) => items
            .iter()
            .map(|item| ConditionInput::from_json(item).ok_or_else(|| corrupt(column, item)))
            .collect(),
        other => Err(corrupt(column, other)),
    }
}

impl AnnouncementRow {
    fn into_announcement(self) -> Result<(AccountId, Announcement), StoreError> {
        let attributes = conditions_from_json("announcements.attributes", &self.attributes)?;
        Ok((
            AccountId::from_uuid(self.account_id),
            Announcement {
                id: AnnouncementId::from_uuid(self.id),
                name: self.name,
                template_id: TemplateId::from_uuid(self.template_id),
                subject: self.subject,
                topic_id: self.topic_id.map(TopicId::from_uuid),
                include_unsubscribed: self.include_unsubscribed,
                attributes,
                segment_id: self.segment_id.map(SegmentId::from_uuid),
                status: AnnouncementStatus::parse(&self.status)
                    .ok_or_else(|| corrupt("announcements.status", &self.status))?,
                send_at: self.send_at.map(timestamp),
                last_sampled_contact_id: self.last_sampled_contact_id.map(ContactId::from_uuid),
                audience_size: u64::try_from(self.audience_size)
                    .map_err(|e| corrupt("announcements.audience_size", e))?,
                expanded_at: self.expanded_at.map(timestamp),
                process_date: self.process_date.map(timestamp),
                failure_reason: self.failure_reason,
                created_at: timestamp(self.created_at),
            },
        ))
    }
}

fn of_account(account: AccountId) -> announcements::BoxedQuery<'static, Pg> {
    announcements::table
        .filter(announcements::account_id.eq(account.as_uuid()))
        .into_boxed()
}

fn one(
    account: AccountId,
    id: AnnouncementId,
) -> diesel::dsl::Filter<
    diesel::dsl::Filter<announcements::table, diesel::dsl::Eq<announcements::account_id, Uuid>>,
    diesel::dsl::Eq<announcements::id, Uuid>,
> {
    announcements::table
        .filter(announcements::account_id.eq(account.as_uuid()))
        .filter(announcements::id.eq(id.as_uuid()))
}

/// Running announcements a worker looks at for one to expand: as many workers can expand
/// at once, each skipping the ones the others hold.
const EXPANSION_CANDIDATES: i64 = 8;

impl AnnouncementRepository for PgUnitOfWork<'_> {
    fn insert_announcement(
        &mut self,
        account: AccountId,
        announcement: &Announcement,
    ) -> Result<(), StoreError> {
        let row = AnnouncementRow {
            account_id: account.as_uuid(),
            id: announcement.id.as_uuid(),
            name: announcement.name.clone(),
            template_id: announcement.template_id.as_uuid(),
            subject: announcement.subject.clone(),
            topic_id: announcement.topic_id.map(|id| id.as_uuid()),
            include_unsubscribed: announcement.include_unsubscribed,
            attributes: conditions_json(&announcement.attributes),
            status: announcement.status.as_str().to_owned(),
            last_sampled_contact_id: announcement.last_sampled_contact_id.map(|id| id.as_uuid()),
            expanded_at: announcement.expanded_at.map(|t| t.as_datetime()),
            audience_size: i64::try_from(announcement.audience_size).unwrap_or(i64::MAX),
            process_date: announcement.process_date.map(|t| t.as_datetime()),
            failure_reason: announcement.failure_reason.clone(),
            created_at: announcement.created_at.as_datetime(),
            updated_at: announcement.created_at.as_datetime(),
            segment_id: announcement.segment_id.map(|id| id.as_uuid()),
            send_at: announcement.send_at.map(|t| t.as_datetime()),
        };
        diesel::insert_into(announcements::table)
            .values(&row)
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn find_announcement(
        &mut self,
        account: AccountId,
        id: AnnouncementId,
    ) -> Result<Option<Announcement>, StoreError> {
        one(account, id)
            .select(AnnouncementRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(store_error)?
            .map(|row| row.into_announcement().map(|(_, found)| found))
            .transpose()
    }

    fn announcement_counters(
        &mut self,
        account: AccountId,
        id: AnnouncementId,
    ) -> Result<AnnouncementCounters, StoreError> {
        // One row per backend that wrote to it (migration 25), whatever the audience size.
        let sums: CounterSums = prepared_sql(
            "SELECT coalesce(sum(queued), 0)::bigint AS queued, \
                    coalesce(sum(sending), 0)::bigint AS sending, \
                    coalesce(sum(sent), 0)::bigint AS sent, \
                    coalesce(sum(failed), 0)::bigint AS failed, \
                    coalesce(sum(bounced), 0)::bigint AS bounced, \
                    coalesce(sum(skipped), 0)::bigint AS skipped, \
                    coalesce(sum(opened), 0)::bigint AS opened, \
                    coalesce(sum(clicked), 0)::bigint AS clicked \
             FROM announcement_counters WHERE account_id = $1 AND announcement_id = $2",
        )
        .bind::<diesel::sql_types::Uuid, _>(account.as_uuid())
        .bind::<diesel::sql_types::Uuid, _>(id.as_uuid())
        .get_result(self.conn)
        .map_err(store_error)?;
        // A negative sum would mean a lost update; it reads as zero rather than wrapping.
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        Ok(AnnouncementCounters {
            queued: count(sums.queued),
            sending: count(sums.sending),
            sent: count(sums.sent),
            failed: count(sums.failed),
            bounced: count(sums.bounced),
            skipped: count(sums.skipped),
            opened: count(sums.opened),
            clicked: count(sums.clicked),
        })
    }

    fn list_announcements(
        &mut self,
        account: AccountId,
        page: PageRequest,
    ) -> Result<Vec<Announcement>, StoreError> {
        let (offset, limit) = page_bounds(page);
        of_account(account)
            .order((announcements::created_at.asc(), announcements::id.asc()))
            .offset(offset)
            .limit(limit)
            .select(AnnouncementRow::as_select())
            .load(self.conn)
            .map_err(store_error)?
            .into_iter()
            .map(|row| row.into_announcement().map(|(_, found)| found))
            .collect()
    }

    fn count_announcements(&mut self, account: AccountId) -> Result<u64, StoreError> {
        let count: i64 = of_account(account)
            .count()
            .get_result(self.conn)
            .map_err(store_error)?;
        u64::try_from(count).map_err(|e| corrupt("announcement count", e))
    }

    fn lock_next_expansion(
        &mut self,
        now: Timestamp,
    ) -> Result<Option<(AccountId, Announcement)>, StoreError> {
        // The oldest few candidates of any account, read without a lock (on Citus a read
        // of every shard, the one statement of the expansion that is not one account's),
        // then each locked by its own key (one shard), skipping one another worker holds.
        // Running ones come first; a scheduled one whose start has come is started by the
        // lock (announcements_scheduled_idx finds those).
        let candidates: Vec<(Uuid, Uuid)> = crate::citus::fan_out(self.conn, |conn| {
            let mut candidates: Vec<(Uuid, Uuid)> = announcements::table
                .filter(announcements::status.eq(AnnouncementStatus::Running.as_str()))
                .filter(announcements::expanded_at.is_null())
                .order(announcements::created_at.asc())
                .select((announcements::account_id, announcements::id))
                .limit(EXPANSION_CANDIDATES)
                .load(conn)
                .map_err(store_error)?;
            candidates.extend(
                announcements::table
                    .filter(announcements::status.eq(AnnouncementStatus::Scheduled.as_str()))
                    .filter(announcements::send_at.le(now.as_datetime()))
                    .order(announcements::send_at.asc())
                    .select((announcements::account_id, announcements::id))
                    .limit(EXPANSION_CANDIDATES)
                    .load::<(Uuid, Uuid)>(conn)
                    .map_err(store_error)?,
            );
            Ok(candidates)
        })?;
        for (account, id) in candidates {
            let locked = announcements::table
                .filter(announcements::account_id.eq(account))
                .filter(announcements::id.eq(id))
                .filter(announcements::expanded_at.is_null())
                .filter(
                    announcements::status
                        .eq(AnnouncementStatus::Running.as_str())
                        .or(announcements::status
                            .eq(AnnouncementStatus::Scheduled.as_str())
                            .and(announcements::send_at.le(now.as_datetime()))),
                )
                .select(AnnouncementRow::as_select())
                .for_update()
                .skip_locked()
                .first(self.conn)
                .optional()
                .map_err(store_error)?;
            let Some(row) = locked else { continue };
            let (account, mut announcement) = row.into_announcement()?;
            if announcement.status == AnnouncementStatus::Scheduled {
                self.change_announcement_status(
                    account,
                    announcement.id,
                    AnnouncementStatus::Scheduled,
                    AnnouncementStatus::Running,
                    now,
                )?;
                announcement.status = AnnouncementStatus::Running;
            }
            return Ok(Some((account, announcement)));
        }
        Ok(None)
    }

    fn change_announcement_status(
        &mut self,
        account: AccountId,
        id: AnnouncementId,
        from: AnnouncementStatus,
        to: AnnouncementStatus,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let process_date = to.is_final().then(|| now.as_datetime());
        diesel::update(
            announcements::table
                .filter(announcements::account_id.eq(account.as_uuid()))
                .filter(announcements::id.eq(id.as_uuid()))
                .filter(announcements::status.eq(from.as_str())),
        )
        .set((
            announcements::status.eq(to.as_str()),
            announcements::process_date.eq(process_date),
            announcements::updated_at.eq(now.as_datetime()),
        ))
        .execute(self.conn)
        .map(|changed| changed > 0)
        .map_err(store_error)
    }

    fn hold_announcement_messages(
        &mut self,
        account: AccountId,
        id: AnnouncementId,
    ) -> Result<u64, StoreError> {
        // Out of the due index, due times kept; the counters see no change (a held message
        // is `queued` to them, `message_state`), and the lane finds nothing due in them.
        prepared_sql(
            "UPDATE messages SET status = 'held' \
             WHERE account_id = $1 AND announcement_id = $2 \
               AND status = 'queued' AND lease_token IS NULL",
        )
        .bind::<diesel::sql_types::Uuid, _>(account.as_uuid())
        .bind::<diesel::sql_types::Uuid, _>(id.as_uuid())
        .execute(self.conn)
        .map(|n| n as u64)
        .map_err(store_error)
    }

    fn release_announcement_messages(
        &mut self,
        account: AccountId,
        id: AnnouncementId,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        let released = prepared_sql(
            "UPDATE messages SET status = 'queued' \
             WHERE account_id = $1 AND announcement_id = $2 AND status = 'held'",
        )
        .bind::<diesel::sql_types::Uuid, _>(account.as_uuid())
        .bind::<diesel::sql_types::Uuid, _>(id.as_uuid())
        .execute(self.conn)
        .map_err(store_error)?;
        // The lane is brought forward to now rather than to the earliest released due
        // time: a claim that finds nothing due yet reschedules the lane to it.
        if released > 0 {
            bring_lanes_forward(
                self.conn,
                Lanes::Delivery,
                [(account.as_uuid(), now.as_datetime())],
            )?;
        }
        Ok(released as u64)
    }

    fn skip_announcement_messages(
        &mut self,
        account: AccountId,
        id: AnnouncementId,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        let skipped = prepared_sql(format!(
            "UPDATE messages SET status = 'skipped', skip_reason = '{reason}', \
                 next_attempt_at = NULL, updated_at = $3 \
             WHERE account_id = $1 AND announcement_id = $2 \
               AND (status = 'held' OR (status = 'queued' AND lease_token IS NULL))",
            reason = SkipReason::Cancelled.as_str()
        ))
        .bind::<diesel::sql_types::Uuid, _>(account.as_uuid())
        .bind::<diesel::sql_types::Uuid, _>(id.as_uuid())
        .bind::<Timestamptz, _>(now.as_datetime())
        .execute(self.conn)
        .map_err(store_error)?;
        let mut counters = AccountCounters::default();
        counters.added(id.as_uuid(), MessageStatus::Queued, -(skipped as i64));
        counters.added(id.as_uuid(), MessageStatus::Skipped, skipped as i64);
        add_to_counters(self.conn, account.as_uuid(), &counters)?;
        Ok(skipped as u64)
    }

    fn queue_audience_batch(
        &mut self,
        batch: &AudienceBatch<'_>,
    ) -> Result<QueuedAudience, StoreError> {
        queue_audience_batch(self.conn, batch)
    }

    fn record_expansion(
        &mut self,
        account: AccountId,
        id: AnnouncementId,
        last_contact: Option<ContactId>,
        added: u64,
        expanded_at: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        diesel::update(one(account, id))
            .set((
                announcements::last_sampled_contact_id.eq(last_contact.map(|id| id.as_uuid())),
                announcements::audience_size
                    .eq(announcements::audience_size + i64::try_from(added).unwrap_or(i64::MAX)),
                announcements::expanded_at.eq(expanded_at.map(|t| t.as_datetime())),
                announcements::updated_at.eq(now.as_datetime()),
            ))
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn fail_announcement(
        &mut self,
        account: AccountId,
        id: AnnouncementId,
        reason: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        diesel::update(one(account, id))
            .set((
                announcements::status.eq(AnnouncementStatus::Failed.as_str()),
                announcements::failure_reason.eq(reason),
                announcements::process_date.eq(now.as_datetime()),
                announcements::updated_at.eq(now.as_datetime()),
            ))
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }

    fn complete_finished_announcements(&mut self, now: Timestamp) -> Result<u64, StoreError> {
        // The expanded announcements still running, of any account, read without a lock
        // (on Citus a read of every shard; a sweep that wrote would commit on every node
        // each time), then each completed by its own key (one shard) once none of its
        // messages is pending. The NOT EXISTS is served by the partial index
        // messages_announcement_pending_idx, which holds only the pending rows (waiting
        // or in flight, both stored as `queued`): cheap however many messages are final.
        let running: Vec<(Uuid, Uuid)> = crate::citus::fan_out(self.conn, |conn| {
            announcements::table
                .filter(announcements::status.eq(AnnouncementStatus::Running.as_str()))
                .filter(announcements::expanded_at.is_not_null())
                .select((announcements::account_id, announcements::id))
                .load(conn)
                .map_err(store_error)
        })?;
        let mut completed = 0;
        for (account, id) in running {
            completed += prepared_sql(
                "UPDATE announcements a SET status = 'completed', process_date = $1, \
                     updated_at = $1 \
                 WHERE a.account_id = $2 AND a.id = $3 \
                 AND a.status = 'running' AND a.expanded_at IS NOT NULL \
                 AND NOT EXISTS (SELECT 1 FROM messages m \
                     WHERE m.account_id = $2 AND m.announcement_id = $3 \
                     AND m.announcement_id IS NOT NULL AND m.status = 'queued')",
            )
            .bind::<Timestamptz, _>(now.as_datetime())
            .bind::<diesel::sql_types::Uuid, _>(account)
            .bind::<diesel::sql_types::Uuid, _>(id)
            .execute(self.conn)
            .map_err(store_error)?;
        }
        Ok(completed as u64)
    }
}
