use diesel::{
    pg::{Pg, PgConnection},
    prelude::*,
    sql_types::{
        Array, BigInt, Bool, Date as SqlDate, Integer, Nullable, Text, Timestamptz, Uuid as SqlUuid,
    },
};
use mailroom_app::{
    ports::{ClaimedMessage, DeliveredTo, IdempotentMessage, Lease, MessageRepository},
    StoreError,
};
use mailroom_domain::{
    message::{
        DailyStats, Message, MessageFilter, MessageKind, MessageOrder, MessageStatus, SkipReason,
        StatsCounter,
    },
    paging::PageRequest,
    AccountId, AnnouncementId, AutomationId, ContactId, FormId, MessageId, TemplateId, Timestamp,
    UserId,
};
use serde_json::Value;
use std::collections::BTreeMap;
use time::{Date, OffsetDateTime};
use uuid::Uuid;

use super::contacts::{set_contact_mark, ContactMark};
use super::{corrupt, lower, templates::page_bounds, timestamp, PgUnitOfWork};
use crate::{
    error::store_error,
    prepared_sql::prepared_sql,
    queue::lock_due_lanes,
    schema::{message_stats_daily, messages},
    upkeep::{add_to_counters, bring_lanes_forward, AccountCounters, Lanes},
};

#[derive(Queryable, QueryableByName, Selectable, Insertable)]
#[diesel(table_name = messages, check_for_backend(Pg))]
pub(super) struct MessageRow {
    account_id: Uuid,
    id: Uuid,
    contact_id: Uuid,
    email: String,
    template_id: Uuid,
    kind: String,
    status: String,
    skip_reason: Option<String>,
    data: Value,
    attempts: i32,
    next_attempt_at: Option<OffsetDateTime>,
    locked_until: Option<OffsetDateTime>,
    lease_token: Option<Uuid>,
    last_reply: Option<String>,
    message_id_header: String,
    idempotency_key: Option<String>,
    request_hash: Option<String>,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
    sent_at: Option<OffsetDateTime>,
    automation_id: Option<Uuid>,
    announcement_id: Option<Uuid>,
    claims_without_outcome: i32,
    test: bool,
    form_id: Option<Uuid>,
}

impl TryFrom<MessageRow> for Message {
    type Error = StoreError;

    fn try_from(row: MessageRow) -> Result<Self, StoreError> {
        let data = match row.data {
            Value::Object(map) => map,
            other => return Err(corrupt("messages.data", other)),
        };
        Ok(Self {
            id: MessageId::from_uuid(row.id),
            account_id: AccountId::from_uuid(row.account_id),
            contact_id: ContactId::from_uuid(row.contact_id),
            email: row.email,
            template_id: TemplateId::from_uuid(row.template_id),
            kind: MessageKind::parse(&row.kind)
                .ok_or_else(|| corrupt("messages.kind", &row.kind))?,
            status: message_state(&row.status, row.lease_token)
                .ok_or_else(|| corrupt("messages.status", &row.status))?,
            skip_reason: row
                .skip_reason
                .map(|reason| {
                    SkipReason::parse(&reason)
                        .ok_or_else(|| corrupt("messages.skip_reason", reason))
                })
                .transpose()?,
            data,
            attempts: u32::try_from(row.attempts).map_err(|e| corrupt("messages.attempts", e))?,
            next_attempt_at: row.next_attempt_at.map(timestamp),
            last_reply: row.last_reply,
            message_id_header: row.message_id_header,
            created_at: timestamp(row.created_at),
            updated_at: timestamp(row.updated_at),
            sent_at: row.sent_at.map(timestamp),
            automation_id: row.automation_id.map(AutomationId::from_uuid),
            announcement_id: row.announcement_id.map(AnnouncementId::from_uuid),
            test: row.test,
            form_id: row.form_id.map(FormId::from_uuid),
        })
    }
}

/// A message's state from its stored status and lease: a message in flight is stored as
/// `queued` with a lease, and `sending` is never stored, so a claim writes only columns no
/// index names (migration 35; docs/operations.md, "Delivery engine"). SQL that counts by
/// state uses the same rule, `message_state(status, lease_token)`.
fn message_state(status: &str, lease_token: Option<Uuid>) -> Option<MessageStatus> {
    // A paused announcement's waiting message is stored `held` and is `queued` to all.
    if status == HELD {
        return Some(MessageStatus::Queued);
    }
    match MessageStatus::parse(status)? {
        MessageStatus::Queued if lease_token.is_some() => Some(MessageStatus::Sending),
        // `sending` is not a stored status: the table's CHECK refuses it.
        MessageStatus::Sending => None,
        stored => Some(stored),
    }
}

/// The status column a message in `status` is stored with (see [`message_state`]).
fn stored_status(status: MessageStatus) -> &'static str {
    match status {
        MessageStatus::Sending => QUEUED,
        other => other.as_str(),
    }
}

/// The stored status of every message waiting for a worker or in flight.
const QUEUED: &str = "queued";

/// The stored status of a paused announcement's message that waits for the resume: out of
/// the due index, so no claim reads it (migration `announcement_control`).
const HELD: &str = "held";

pub(super) fn message_row(message: &Message, idempotency: Option<(&str, &str)>) -> MessageRow {
    MessageRow {
        account_id: message.account_id.as_uuid(),
        id: message.id.as_uuid(),
        contact_id: message.contact_id.as_uuid(),
        email: message.email.clone(),
        template_id: message.template_id.as_uuid(),
        kind: message.kind.as_str().to_owned(),
        status: stored_status(message.status).to_owned(),
        skip_reason: message.skip_reason.map(|r| r.as_str().to_owned()),
        data: Value::Object(message.data.clone()),
        attempts: i32::try_from(message.attempts).unwrap_or(i32::MAX),
        next_attempt_at: message.next_attempt_at.map(|t| t.as_datetime()),
        locked_until: None,
        lease_token: None,
        last_reply: message.last_reply.clone(),
        message_id_header: message.message_id_header.clone(),
        idempotency_key: idempotency.map(|(key, _)| key.to_owned()),
        request_hash: idempotency.map(|(_, hash)| hash.to_owned()),
        created_at: message.created_at.as_datetime(),
        updated_at: message.updated_at.as_datetime(),
        sent_at: message.sent_at.map(|t| t.as_datetime()),
        automation_id: message.automation_id.map(|id| id.as_uuid()),
        announcement_id: message.announcement_id.map(|id| id.as_uuid()),
        claims_without_outcome: 0,
        test: message.test,
        form_id: message.form_id.map(|id| id.as_uuid()),
    }
}

fn filtered(account: AccountId, filter: &MessageFilter) -> messages::BoxedQuery<'static, Pg> {
    let mut query = messages::table
        .filter(messages::account_id.eq(account.as_uuid()))
        .into_boxed();
    if let Some(status) = filter.status {
        // A literal, not a bound value: the planner can use the partial
        // `messages_status_idx` (`status <> 'sent'`, migration 36) only for a constant it
        // can prove is not `sent`; a generic plan of `status = $2` would read the log.
        // `stored_status` gives one of the table's own status names, never caller text.
        query = query.filter(diesel::dsl::sql::<Bool>(&match status {
            MessageStatus::Queued => format!("messages.status IN ('{QUEUED}', '{HELD}')"),
            other => format!("messages.status = '{}'", stored_status(other)),
        }));
        match status {
            MessageStatus::Queued => query = query.filter(messages::lease_token.is_null()),
            MessageStatus::Sending => query = query.filter(messages::lease_token.is_not_null()),
            _ => {}
        }
    }
    if let Some(contact) = filter.contact_id {
        query = query.filter(messages::contact_id.eq(contact.as_uuid()));
    }
    if let Some(announcement) = filter.announcement_id {
        // Served by messages_announcement_list_idx (migration 25).
        query = query.filter(messages::announcement_id.eq(announcement.as_uuid()));
    }
    if let Some(template) = filter.template_id {
        // Served by messages_template_list_idx.
        query = query.filter(messages::template_id.eq(template.as_uuid()));
    }
    if let Some(email) = &filter.email {
        // Served by messages_recipient_idx, which is on lower(email).
        query = query.filter(lower(messages::email).eq(email.normalized()));
    }
    query
}

fn to_messages(rows: Vec<MessageRow>) -> Result<Vec<Message>, StoreError> {
    rows.into_iter().map(Message::try_from).collect()
}

/// The claim's result columns, named (a prepared statement may not return `*`: see
/// `crate::prepared_sql`); the fields of [`MessageRow`].
const CLAIMED_COLUMNS: &str = "claimed.account_id, claimed.id, claimed.contact_id, claimed.email, claimed.template_id, claimed.kind, claimed.status, claimed.skip_reason, claimed.data, claimed.attempts, claimed.next_attempt_at, claimed.locked_until, claimed.lease_token, claimed.last_reply, claimed.message_id_header, claimed.idempotency_key, claimed.request_hash, claimed.created_at, claimed.updated_at, claimed.sent_at, claimed.automation_id, claimed.announcement_id, claimed.claims_without_outcome, claimed.test, claimed.form_id";

/// A claimed row with the status it was claimed from.
#[derive(QueryableByName)]
struct ClaimedRow {
    #[diesel(embed)]
    message: MessageRow,
    #[diesel(sql_type = Text)]
    claimed_from: String,
}

/// What a record wrote of a message: its new status (the lease is gone, so it is the
/// state), due time and announcement.
#[derive(Queryable, QueryableByName, Selectable)]
#[diesel(table_name = messages, check_for_backend(Pg))]
struct WrittenRow {
    id: Uuid,
    status: String,
    next_attempt_at: Option<OffsetDateTime>,
    announcement_id: Option<Uuid>,
}

/// The upkeep of a record of `account`'s messages (`written`, each under its lease, so
/// each was `sending`): the lane brought forward by the rows that wait again (a retry, a
/// wait for a mail server), the announcement counters moved from `sending`.
fn after_record(
    conn: &mut PgConnection,
    account: Uuid,
    written: Vec<WrittenRow>,
) -> Result<(), StoreError> {
    let mut counters = AccountCounters::default();
    let mut due = Vec::new();
    for row in written {
        let state = message_state(&row.status, None)
            .ok_or_else(|| corrupt("messages.status", &row.status))?;
        if let (MessageStatus::Queued, Some(at)) = (state, row.next_attempt_at) {
            due.push((account, at));
        }
        if let Some(announcement) = row.announcement_id {
            counters.moved(announcement, Some(MessageStatus::Sending), Some(state));
        }
    }
    bring_lanes_forward(conn, Lanes::Delivery, due)?;
    add_to_counters(conn, account, &counters)
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = message_stats_daily, check_for_backend(Pg))]
struct StatsRow {
    day: Date,
    bounce_blocked: i64,
    complained: i64,
    complaint_blocked: i64,
    free_limit_capped: i64,
    bounced: i64,
    clicked: i64,
    failed: i64,
    opened: i64,
    sent: i64,
    unsubscribed: i64,
}

impl StatsRow {
    fn into_stats(self) -> DailyStats {
        let mut stats = DailyStats::zero(self.day);
        let values = [
            (StatsCounter::BounceBlocked, self.bounce_blocked),
            (StatsCounter::Complained, self.complained),
            (StatsCounter::ComplaintBlocked, self.complaint_blocked),
            (StatsCounter::FreeLimitCapped, self.free_limit_capped),
            (StatsCounter::Bounced, self.bounced),
            (StatsCounter::Clicked, self.clicked),
            (StatsCounter::Failed, self.failed),
            (StatsCounter::Opened, self.opened),
            (StatsCounter::Sent, self.sent),
            (StatsCounter::Unsubscribed, self.unsubscribed),
        ];
        for (counter, value) in values {
            stats.set(counter, u64::try_from(value).unwrap_or(0));
        }
        stats
    }
}

impl MessageRepository for PgUnitOfWork<'_> {
    fn insert_message(
        &mut self,
        message: &Message,
        idempotency: Option<(&str, &str)>,
    ) -> Result<(), StoreError> {
        diesel::insert_into(messages::table)
            .values(message_row(message, idempotency))
            .execute(self.conn)
            .map_err(store_error)?;
        // A new row has no lease: it waits for a worker when it is stored as `queued`.
        let account = message.account_id.as_uuid();
        let state = message_state(stored_status(message.status), None);
        if let (Some(MessageStatus::Queued), Some(due)) = (state, message.next_attempt_at) {
            bring_lanes_forward(self.conn, Lanes::Delivery, [(account, due.as_datetime())])?;
        }
        if let (Some(announcement), Some(state)) = (message.announcement_id, state) {
            let mut counters = AccountCounters::default();
            counters.added(announcement.as_uuid(), state, 1);
            add_to_counters(self.conn, account, &counters)?;
        }
        Ok(())
    }

    fn skip_waiting_message(
        &mut self,
        account: AccountId,
        id: MessageId,
        reason: SkipReason,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        #[derive(QueryableByName)]
        struct Skipped {
            #[diesel(sql_type = Nullable<SqlUuid>)]
            announcement_id: Option<Uuid>,
        }
        // `reason` is one of the domain's names, never caller text.
        let skipped: Option<Skipped> = prepared_sql(format!(
            "UPDATE messages SET status = 'skipped', skip_reason = '{reason}', \
                 next_attempt_at = NULL, updated_at = $3 \
             WHERE account_id = $1 AND id = $2 \
               AND status IN ('{QUEUED}', '{HELD}') AND lease_token IS NULL \
             RETURNING announcement_id",
            reason = reason.as_str()
        ))
        .bind::<SqlUuid, _>(account.as_uuid())
        .bind::<SqlUuid, _>(id.as_uuid())
        .bind::<Timestamptz, _>(now.as_datetime())
        .get_result(self.conn)
        .optional()
        .map_err(store_error)?;
        let Some(skipped) = skipped else {
            return Ok(false);
        };
        if let Some(announcement) = skipped.announcement_id {
            let mut counters = AccountCounters::default();
            counters.moved(
                announcement,
                Some(MessageStatus::Queued),
                Some(MessageStatus::Skipped),
            );
            add_to_counters(self.conn, account.as_uuid(), &counters)?;
        }
        Ok(true)
    }

    fn find_message_by_idempotency_key(
        &mut self,
        account: AccountId,
        key: &str,
    ) -> Result<Option<IdempotentMessage>, StoreError> {
        let Some(row) = messages::table
            .filter(messages::account_id.eq(account.as_uuid()))
            .filter(messages::idempotency_key.eq(key))
            .select(MessageRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(store_error)?
        else {
            return Ok(None);
        };
        let request_hash = row
            .request_hash
            .clone()
            .ok_or_else(|| corrupt("messages.request_hash", "missing with a key"))?;
        Ok(Some(IdempotentMessage {
            message: Message::try_from(row)?,
            request_hash,
        }))
    }

    fn release_idempotency_key(&mut self, account: AccountId, key: &str) -> Result<(), StoreError> {
        diesel::update(
            messages::table
                .filter(messages::account_id.eq(account.as_uuid()))
                .filter(messages::idempotency_key.eq(key)),
        )
        .set((
            messages::idempotency_key.eq(None::<String>),
            messages::request_hash.eq(None::<String>),
        ))
        .execute(self.conn)
        .map(drop)
        .map_err(store_error)
    }

    fn find_message(
        &mut self,
        account: AccountId,
        id: MessageId,
    ) -> Result<Option<Message>, StoreError> {
        messages::table
            .find((account.as_uuid(), id.as_uuid()))
            .select(MessageRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(store_error)?
            .map(Message::try_from)
            .transpose()
    }

    fn list_messages(
        &mut self,
        account: AccountId,
        filter: &MessageFilter,
        order: MessageOrder,
        page: PageRequest,
    ) -> Result<Vec<Message>, StoreError> {
        let (offset, limit) = page_bounds(page);
        // Every filter's index ends in (created_at, id), read forwards or backwards.
        let query = filtered(account, filter);
        let query = match order {
            MessageOrder::OldestFirst => {
                query.order((messages::created_at.asc(), messages::id.asc()))
            }
            MessageOrder::NewestFirst => {
                query.order((messages::created_at.desc(), messages::id.desc()))
            }
        };
        let rows = query
            .offset(offset)
            .limit(limit)
            .select(MessageRow::as_select())
            .load(self.conn)
            .map_err(store_error)?;
        to_messages(rows)
    }

    fn count_messages(
        &mut self,
        account: AccountId,
        filter: &MessageFilter,
    ) -> Result<u64, StoreError> {
        filtered(account, filter)
            .count()
            .get_result::<i64>(self.conn)
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(store_error)
    }

    fn lock_due_lanes(
        &mut self,
        now: Timestamp,
        limit: u32,
        skip_accounts: &[AccountId],
    ) -> Result<Vec<AccountId>, StoreError> {
        lock_due_lanes(self.conn, "delivery_lanes", now, limit, skip_accounts)
    }

    fn claim_due_messages(
        &mut self,
        account: AccountId,
        now: Timestamp,
        lease: &Lease,
        limit: u32,
    ) -> Result<Vec<ClaimedMessage>, StoreError> {
        // One statement: the inner SELECT locks the account's due rows (skipping rows
        // other claims hold), the UPDATE stamps the lease and counts the claim; the row
        // locks end when it commits. The domain's claimable states (`queued`, and
        // `sending` whose lease ran out) are both stored as `queued`, the literal the
        // partial index `messages_account_due_idx` names; the claim leaves `status` alone,
        // so its new row versions can be HOT (see `message_state`). Each row comes back
        // with the state it was claimed from, for the domain's `Message::claim`.
        //
        // The due rows are a MATERIALIZED part: read once. As a subquery of the UPDATE a
        // plan may scan them again for each row it joins (a nested loop), and each scan
        // locks and returns rows past the LIMIT: measured on a Citus shard, 27 rows for a
        // LIMIT of 16, and a worker that came to hold every message of its accounts.
        let mut rows: Vec<ClaimedRow> = prepared_sql(format!(
            "WITH due AS MATERIALIZED (\
               SELECT account_id, id, message_state(status, lease_token) AS claimed_from \
               FROM messages \
               WHERE account_id = $5 AND status = '{QUEUED}' \
                 AND next_attempt_at <= $3 \
                 AND (locked_until IS NULL OR locked_until <= $3) \
               ORDER BY next_attempt_at \
               LIMIT $4 \
               FOR UPDATE SKIP LOCKED) \
             UPDATE messages AS claimed \
             SET locked_until = $1, lease_token = $2, \
                 claims_without_outcome = claimed.claims_without_outcome + 1 \
             FROM due \
             WHERE claimed.account_id = $5 AND claimed.account_id = due.account_id \
               AND claimed.id = due.id \
             RETURNING {CLAIMED_COLUMNS}, due.claimed_from",
        ))
        .bind::<Timestamptz, _>(lease.until.as_datetime())
        .bind::<SqlUuid, _>(lease.token)
        .bind::<Timestamptz, _>(now.as_datetime())
        .bind::<BigInt, _>(i64::from(limit))
        .bind::<SqlUuid, _>(account.as_uuid())
        .load(self.conn)
        .map_err(store_error)?;
        // The announcement counters: a row claimed from `queued` is now `sending` (one
        // whose lease ran out was `sending` already). No lane moves: a claimed row waits
        // for no worker, and the claim reschedules its lanes itself.
        let mut counters = AccountCounters::default();
        for claimed in &rows {
            if let (Some(announcement), QUEUED) = (
                claimed.message.announcement_id,
                claimed.claimed_from.as_str(),
            ) {
                counters.moved(
                    announcement,
                    Some(MessageStatus::Queued),
                    Some(MessageStatus::Sending),
                );
            }
        }
        add_to_counters(self.conn, account.as_uuid(), &counters)?;
        // RETURNING has no order; send the longest-waiting first.
        rows.sort_by_key(|claimed| (claimed.message.next_attempt_at, claimed.message.id));
        rows.into_iter()
            .map(
                |ClaimedRow {
                     message: row,
                     claimed_from,
                 }| {
                    let claims_without_outcome = u32::try_from(row.claims_without_outcome)
                        .map_err(|e| corrupt("messages.claims_without_outcome", e))?;
                    // `claimed_from` is already the state (`message_state` in the SQL).
                    let claimed_from = MessageStatus::parse(&claimed_from)
                        .ok_or_else(|| corrupt("the claimed message's state", &claimed_from))?;
                    let mut message = Message::try_from(row)?;
                    message.status = claimed_from;
                    Ok(ClaimedMessage {
                        message,
                        claims_without_outcome,
                    })
                },
            )
            .collect()
    }

    fn reschedule_lanes(
        &mut self,
        lanes: &[(AccountId, bool)],
        now: Timestamp,
    ) -> Result<(), StoreError> {
        // Two reads of the due index bounded by what the account has in flight: the first
        // waiting row in due order (in-flight rows come first in the index and are
        // stepped over), and the earliest lease end of the in-flight ones. Every
        // in-flight row was due when it was claimed, so they all lie within
        // `next_attempt_at <= now`, with only the due rows the lane's last claim left (a
        // lane that is not backlogged left few).
        crate::queue::set_lanes_due(
            self.conn,
            "delivery_lanes",
            &format!(
                "SELECT least( \
                     (SELECT m.next_attempt_at FROM messages m \
                      WHERE m.account_id = $1 AND m.status = '{QUEUED}' \
                        AND (m.locked_until IS NULL OR m.locked_until <= $2) \
                      ORDER BY m.next_attempt_at LIMIT 1), \
                     (SELECT min(m.locked_until) FROM messages m \
                      WHERE m.account_id = $1 AND m.status = '{QUEUED}' \
                        AND m.next_attempt_at <= $2 AND m.lease_token IS NOT NULL)) AS due"
            ),
            lanes,
            now,
        )
    }

    fn renew_message_leases(
        &mut self,
        token: Uuid,
        account: AccountId,
        ids: &[MessageId],
        until: Timestamp,
    ) -> Result<u64, StoreError> {
        let ids: Vec<Uuid> = ids.iter().map(|id| id.as_uuid()).collect();
        // The rows are locked in key order and rows another transaction holds are skipped:
        // those are being recorded right now (their outcome ends the lease anyway), and
        // waiting for them, in whatever order the plan visits rows, deadlocked with the
        // record's transactions.
        prepared_sql(
            "UPDATE messages AS held SET locked_until = $1 \
             FROM (SELECT account_id, id FROM messages \
                   WHERE account_id = $4 AND lease_token = $2 AND id = ANY($3) \
                   ORDER BY account_id, id \
                   FOR UPDATE SKIP LOCKED) AS mine \
             WHERE held.account_id = $4 AND held.account_id = mine.account_id \
               AND held.id = mine.id",
        )
        .bind::<Timestamptz, _>(until.as_datetime())
        .bind::<SqlUuid, _>(token)
        .bind::<Array<SqlUuid>, _>(ids)
        .bind::<SqlUuid, _>(account.as_uuid())
        .execute(self.conn)
        .map(|n| n as u64)
        .map_err(store_error)
    }

    fn record_message_state(
        &mut self,
        message: &Message,
        lease_token: Uuid,
    ) -> Result<bool, StoreError> {
        let row = message_row(message, None);
        let account = row.account_id;
        let written: Option<WrittenRow> = diesel::update(
            messages::table
                .filter(messages::account_id.eq(row.account_id))
                .filter(messages::id.eq(row.id))
                .filter(messages::lease_token.eq(lease_token)),
        )
        .set((
            messages::status.eq(row.status),
            messages::skip_reason.eq(row.skip_reason),
            messages::attempts.eq(row.attempts),
            messages::next_attempt_at.eq(row.next_attempt_at),
            messages::last_reply.eq(row.last_reply),
            messages::updated_at.eq(row.updated_at),
            messages::sent_at.eq(row.sent_at),
            messages::locked_until.eq(None::<OffsetDateTime>),
            messages::lease_token.eq(None::<Uuid>),
            messages::claims_without_outcome.eq(0),
        ))
        .returning(WrittenRow::as_returning())
        .get_result(self.conn)
        .optional()
        .map_err(store_error)?;
        let recorded = written.is_some();
        after_record(self.conn, account, written.into_iter().collect())?;
        Ok(recorded)
    }

    fn record_message_states(
        &mut self,
        account: AccountId,
        messages: &[&Message],
        lease_token: Uuid,
    ) -> Result<Vec<MessageId>, StoreError> {
        if messages.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<MessageRow> = messages
            .iter()
            .map(|message| message_row(message, None))
            .collect();
        // One UPDATE joined to the batch as arrays (one parameter per column, however
        // large the batch). The rows are this worker's under its lease: no other writer
        // waits for them, so their lock order does not matter.
        let written: Vec<WrittenRow> = prepared_sql(
            "UPDATE messages AS m \
             SET status = v.status, skip_reason = v.skip_reason, attempts = v.attempts, \
                 next_attempt_at = v.next_attempt_at, last_reply = v.last_reply, \
                 updated_at = v.updated_at, sent_at = v.sent_at, locked_until = NULL, \
                 lease_token = NULL, claims_without_outcome = 0 \
             FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::int4[], \
                         $6::timestamptz[], $7::text[], $8::timestamptz[], $9::timestamptz[]) \
                  AS v(account_id, id, status, skip_reason, attempts, next_attempt_at, \
                       last_reply, updated_at, sent_at) \
             WHERE m.account_id = $11 AND m.account_id = v.account_id AND m.id = v.id \
               AND m.lease_token = $10 \
             RETURNING m.id, m.status, m.next_attempt_at, m.announcement_id",
        )
        .bind::<Array<SqlUuid>, _>(rows.iter().map(|r| r.account_id).collect::<Vec<_>>())
        .bind::<Array<SqlUuid>, _>(rows.iter().map(|r| r.id).collect::<Vec<_>>())
        .bind::<Array<Text>, _>(rows.iter().map(|r| r.status.clone()).collect::<Vec<_>>())
        .bind::<Array<Nullable<Text>>, _>(
            rows.iter()
                .map(|r| r.skip_reason.clone())
                .collect::<Vec<_>>(),
        )
        .bind::<Array<Integer>, _>(rows.iter().map(|r| r.attempts).collect::<Vec<_>>())
        .bind::<Array<Nullable<Timestamptz>>, _>(
            rows.iter().map(|r| r.next_attempt_at).collect::<Vec<_>>(),
        )
        .bind::<Array<Nullable<Text>>, _>(
            rows.iter()
                .map(|r| r.last_reply.clone())
                .collect::<Vec<_>>(),
        )
        .bind::<Array<Timestamptz>, _>(rows.iter().map(|r| r.updated_at).collect::<Vec<_>>())
        .bind::<Array<Nullable<Timestamptz>>, _>(rows.iter().map(|r| r.sent_at).collect::<Vec<_>>())
        .bind::<SqlUuid, _>(lease_token)
        .bind::<SqlUuid, _>(account.as_uuid())
        .load(self.conn)
        .map_err(store_error)?;
        let ids = written
            .iter()
            .map(|row| MessageId::from_uuid(row.id))
            .collect();
        after_record(self.conn, account.as_uuid(), written)?;
        Ok(ids)
    }

    fn count_messages_to_contacts(
        &mut self,
        contacts: &[DeliveredTo],
        at: Timestamp,
    ) -> Result<(), StoreError> {
        if contacts.is_empty() {
            return Ok(());
        }
        // One statement per account, accounts in order (one shard each on Citus). The CTE
        // locks in key order (the sort runs below the lock); the UPDATE then finds every
        // row already locked by this transaction. `last_sent_at` carries no index, so a
        // sent message's update stays heap-only; a bounce moves the indexed
        // `last_bounced_at`, and that rarer update is not.
        /// One account's columns of the batch: contact ids, sent counts, bounced flags.
        #[derive(Default)]
        struct Columns {
            ids: Vec<Uuid>,
            counts: Vec<i64>,
            bounced: Vec<bool>,
        }
        let mut by_account: BTreeMap<Uuid, Columns> = BTreeMap::new();
        for delivered in contacts {
            let columns = by_account.entry(delivered.account.as_uuid()).or_default();
            columns.ids.push(delivered.contact.as_uuid());
            columns.counts.push(i64::from(delivered.sent));
            columns.bounced.push(delivered.bounced);
        }
        for (
            account,
            Columns {
                ids,
                counts,
                bounced,
            },
        ) in by_account
        {
            prepared_sql(
                "WITH batch AS ( \
                     SELECT contact_id, sum(n)::bigint AS n, bool_or(bounced) AS bounced \
                     FROM unnest($2::uuid[], $3::int8[], $4::bool[]) AS t(contact_id, n, bounced) \
                     GROUP BY contact_id), \
                 locked AS ( \
                     SELECT c.id FROM contacts c JOIN batch b ON c.id = b.contact_id \
                     WHERE c.account_id = $1 \
                     ORDER BY c.id \
                     FOR UPDATE OF c) \
                 UPDATE contacts AS c SET message_count = c.message_count + b.n, \
                     last_sent_at = CASE WHEN b.n > 0 \
                         THEN greatest(c.last_sent_at, $5) ELSE c.last_sent_at END, \
                     last_bounced_at = CASE WHEN b.bounced \
                         THEN greatest(c.last_bounced_at, $5) ELSE c.last_bounced_at END \
                 FROM batch b JOIN locked l ON l.id = b.contact_id \
                 WHERE c.account_id = $1 AND c.id = b.contact_id AND (b.n > 0 OR b.bounced)",
            )
            .bind::<SqlUuid, _>(account)
            .bind::<Array<SqlUuid>, _>(ids)
            .bind::<Array<BigInt>, _>(counts)
            .bind::<Array<Bool>, _>(bounced)
            .bind::<Timestamptz, _>(at.as_datetime())
            .execute(self.conn)
            .map_err(store_error)?;
        }
        Ok(())
    }

    fn mark_contact_hard_bounced(
        &mut self,
        account: AccountId,
        contact: ContactId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        set_contact_mark(self.conn, account, contact, ContactMark::HardBounced, now)
    }

    fn add_to_stats(
        &mut self,
        account: AccountId,
        day: Date,
        counter: StatsCounter,
        by: u64,
    ) -> Result<(), StoreError> {
        // The column name comes from a closed enum, never from input.
        let column = counter.column();
        prepared_sql(format!(
            "INSERT INTO message_stats_daily (account_id, day, {column}) VALUES ($1, $2, $3) \
             ON CONFLICT (account_id, day) \
             DO UPDATE SET {column} = message_stats_daily.{column} + EXCLUDED.{column}"
        ))
        .bind::<SqlUuid, _>(account.as_uuid())
        .bind::<SqlDate, _>(day)
        .bind::<BigInt, _>(i64::try_from(by).unwrap_or(i64::MAX))
        .execute(self.conn)
        .map(drop)
        .map_err(store_error)
    }

    fn daily_stats(
        &mut self,
        account: AccountId,
        first: Date,
        last: Date,
    ) -> Result<Vec<DailyStats>, StoreError> {
        let rows = message_stats_daily::table
            .filter(message_stats_daily::account_id.eq(account.as_uuid()))
            .filter(message_stats_daily::day.between(first, last))
            .order(message_stats_daily::day.asc())
            .select(StatsRow::as_select())
            .load(self.conn)
            .map_err(store_error)?;
        Ok(rows.into_iter().map(StatsRow::into_stats).collect())
    }

    fn account_owner(&mut self, account: AccountId) -> Result<Option<UserId>, StoreError> {
        use crate::schema::memberships;
        memberships::table
            .filter(memberships::account_id.eq(account.as_uuid()))
            .filter(memberships::role.eq(mailroom_domain::account::Role::Owner.as_str()))
            .select(memberships::user_id)
            .first::<Uuid>(self.conn)
            .optional()
            .map(|owner| owner.map(UserId::from_uuid))
            .map_err(store_error)
    }

    fn add_monthly_sends(
        &mut self,
        owner: UserId,
        account: AccountId,
        month: Date,
        sends: u64,
    ) -> Result<(), StoreError> {
        // A local table on Citus (crate::citus::LOCAL_TABLES): the statement runs on the
        // coordinator, beside the record's statements on the account's shard.
        prepared_sql(
            "INSERT INTO monthly_sends (owner_id, month, account_id, sends) \
             VALUES ($1, $2, $3, $4) \
             ON CONFLICT (owner_id, month, account_id) \
             DO UPDATE SET sends = monthly_sends.sends + EXCLUDED.sends",
        )
        .bind::<SqlUuid, _>(owner.as_uuid())
        .bind::<SqlDate, _>(month)
        .bind::<SqlUuid, _>(account.as_uuid())
        .bind::<BigInt, _>(i64::try_from(sends).unwrap_or(i64::MAX))
        .execute(self.conn)
        .map(drop)
        .map_err(store_error)
    }

    fn owner_monthly_sends(&mut self, owner: UserId, month: Date) -> Result<u64, StoreError> {
        #[derive(QueryableByName)]
        struct Total {
            #[diesel(sql_type = BigInt)]
            sends: i64,
        }
        // One owner's rows, by the primary key's prefix: as many rows as accounts owned.
        prepared_sql(
            "SELECT coalesce(sum(sends), 0)::bigint AS sends FROM monthly_sends \
             WHERE owner_id = $1 AND month = $2",
        )
        .bind::<SqlUuid, _>(owner.as_uuid())
        .bind::<SqlDate, _>(month)
        .get_result::<Total>(self.conn)
        .map(|total| u64::try_from(total.sends).unwrap_or(0))
        .map_err(store_error)
    }
}
