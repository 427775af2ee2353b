//! The tables kept beside the rows they summarise, written by the repository in the same
//! transaction as the write that changes them (no trigger: Citus distributes no table
//! with one, and a shard cannot write the coordinator's tables; docs/operations.md,
//! "Upkeep in the repository"):
//!
//! - the due lanes (`delivery_lanes`, `webhook_lanes`): [`bring_lanes_forward`] after every
//!   statement that makes a row wait for a worker, from the due times the statement wrote
//!   or returned (never read back from the queue table: on Citus the lanes live elsewhere
//!   than the queue's shards);
//! - the announcement counters (`announcement_counters`): [`add_to_counters`] after every
//!   statement that changes an announcement message's state (as `message_state` names it)
//!   or gives it its first open or click, from the states the statement knows or returned;
//! - the typed slots (`contact_slots`): [`copy_into_slots`] after every write of attribute
//!   values, from the values written; [`fill_new_slot`] when a new meta takes a slot.

use std::collections::BTreeMap;

use diesel::{
    pg::PgConnection,
    sql_types::{Array, BigInt, Bool, Float8, Nullable, Text, Timestamptz, Uuid as SqlUuid},
    RunQueryDsl,
};
use mailroom_app::StoreError;
use mailroom_domain::{attribute::AttributeType, message::MessageStatus};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::{error::store_error, prepared_sql::prepared_sql};

/// A lanes table: one row per account, `(account_id, next_due_at)`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Lanes {
    /// `delivery_lanes`, the message outbox's.
    Delivery,
    /// `webhook_lanes`, the webhook events'.
    Webhook,
}

impl Lanes {
    fn table(self) -> &'static str {
        match self {
            Self::Delivery => "delivery_lanes",
            Self::Webhook => "webhook_lanes",
        }
    }
}

/// Brings the lane of each account in `due` (rows that now wait for a worker, by account
/// and due time) forward to the account's earliest due time, inserting the lane where
/// there is none; a lane already due earlier stays. One statement, lanes in account
/// order, so concurrent writers never wait for each other in a cycle.
pub(crate) fn bring_lanes_forward(
    conn: &mut PgConnection,
    lanes: Lanes,
    due: impl IntoIterator<Item = (Uuid, OffsetDateTime)>,
) -> Result<(), StoreError> {
    let mut earliest: BTreeMap<Uuid, OffsetDateTime> = BTreeMap::new();
    for (account, at) in due {
        earliest
            .entry(account)
            .and_modify(|known| *known = (*known).min(at))
            .or_insert(at);
    }
    if earliest.is_empty() {
        return Ok(());
    }
    let (accounts, times): (Vec<Uuid>, Vec<OffsetDateTime>) = earliest.into_iter().unzip();
    let table = lanes.table();
    // `table` is a constant of this module, never input.
    prepared_sql(format!(
        "INSERT INTO {table} AS lane (account_id, next_due_at) \
         SELECT account_id, next_due_at \
         FROM unnest($1::uuid[], $2::timestamptz[]) AS due(account_id, next_due_at) \
         ORDER BY account_id \
         ON CONFLICT (account_id) DO UPDATE \
             SET next_due_at = least(lane.next_due_at, EXCLUDED.next_due_at) \
             WHERE lane.next_due_at IS NULL OR lane.next_due_at > EXCLUDED.next_due_at"
    ))
    .bind::<Array<SqlUuid>, _>(accounts)
    .bind::<Array<Timestamptz>, _>(times)
    .execute(conn)
    .map(drop)
    .map_err(store_error)
}

/// What one announcement's counters change by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CounterDeltas {
    queued: i64,
    sending: i64,
    sent: i64,
    failed: i64,
    bounced: i64,
    skipped: i64,
    opened: i64,
    clicked: i64,
}

impl CounterDeltas {
    fn state(&mut self, status: MessageStatus) -> &mut i64 {
        match status {
            MessageStatus::Queued => &mut self.queued,
            MessageStatus::Sending => &mut self.sending,
            MessageStatus::Sent => &mut self.sent,
            MessageStatus::Failed => &mut self.failed,
            MessageStatus::Bounced => &mut self.bounced,
            MessageStatus::Skipped => &mut self.skipped,
        }
    }

    fn is_zero(&self) -> bool {
        *self == Self::default()
    }
}

/// The counter changes of one account's statement, by announcement.
#[derive(Debug, Default)]
pub(crate) struct AccountCounters {
    by_announcement: BTreeMap<Uuid, CounterDeltas>,
}

impl AccountCounters {
    fn of(&mut self, announcement: Uuid) -> &mut CounterDeltas {
        self.by_announcement.entry(announcement).or_default()
    }

    /// A message of `announcement` moved from state `from` (none: it is new) to `to`
    /// (none: it is gone). A move within one state counts nothing.
    pub(crate) fn moved(
        &mut self,
        announcement: Uuid,
        from: Option<MessageStatus>,
        to: Option<MessageStatus>,
    ) {
        if from == to {
            return;
        }
        let deltas = self.of(announcement);
        if let Some(from) = from {
            *deltas.state(from) -= 1;
        }
        if let Some(to) = to {
            *deltas.state(to) += 1;
        }
    }

    /// `n` new messages of `announcement` in state `to`.
    pub(crate) fn added(&mut self, announcement: Uuid, to: MessageStatus, n: i64) {
        *self.of(announcement).state(to) += n;
    }

    /// A first open of a message of `announcement`.
    pub(crate) fn opened(&mut self, announcement: Uuid) {
        self.of(announcement).opened += 1;
    }

    /// A first click of a message of `announcement`.
    pub(crate) fn clicked(&mut self, announcement: Uuid) {
        self.of(announcement).clicked += 1;
    }
}

/// Adds `counters` (the changes of one statement of `account`) to the account's
/// announcement counters: one single-row upsert per announcement that changed (usually
/// one), in announcement order, each with `account_id` in it (one shard on Citus), each
/// change added to the row of this backend's slot (two transactions running at once are
/// never in the same backend, so no two writers share a counter row: migration 25).
/// Nothing is written when nothing changed.
pub(crate) fn add_to_counters(
    conn: &mut PgConnection,
    account: Uuid,
    counters: &AccountCounters,
) -> Result<(), StoreError> {
    for (announcement, deltas) in &counters.by_announcement {
        if deltas.is_zero() {
            continue;
        }
        prepared_sql(
            "INSERT INTO announcement_counters AS c \
                 (account_id, announcement_id, slot, queued, sending, sent, failed, bounced, \
                  skipped, opened, clicked) \
             VALUES ($1, $2, pg_backend_pid(), $3, $4, $5, $6, $7, $8, $9, $10) \
             ON CONFLICT (account_id, announcement_id, slot) DO UPDATE SET \
                 queued = c.queued + EXCLUDED.queued, \
                 sending = c.sending + EXCLUDED.sending, \
                 sent = c.sent + EXCLUDED.sent, \
                 failed = c.failed + EXCLUDED.failed, \
                 bounced = c.bounced + EXCLUDED.bounced, \
                 skipped = c.skipped + EXCLUDED.skipped, \
                 opened = c.opened + EXCLUDED.opened, \
                 clicked = c.clicked + EXCLUDED.clicked",
        )
        .bind::<SqlUuid, _>(account)
        .bind::<SqlUuid, _>(*announcement)
        .bind::<BigInt, _>(deltas.queued)
        .bind::<BigInt, _>(deltas.sending)
        .bind::<BigInt, _>(deltas.sent)
        .bind::<BigInt, _>(deltas.failed)
        .bind::<BigInt, _>(deltas.bounced)
        .bind::<BigInt, _>(deltas.skipped)
        .bind::<BigInt, _>(deltas.opened)
        .bind::<BigInt, _>(deltas.clicked)
        .execute(conn)
        .map_err(store_error)?;
    }
    Ok(())
}

/// Leaves out of `counters` the announcements of `account` that are gone (their counters
/// went with them by cascade; nothing may be written back): for the deletion of messages,
/// whose announcement may have been deleted by hand.
pub(crate) fn of_existing_announcements(
    conn: &mut PgConnection,
    account: Uuid,
    counters: &mut AccountCounters,
) -> Result<(), StoreError> {
    if counters.by_announcement.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = counters.by_announcement.keys().copied().collect();
    let existing: Vec<Existing> =
        prepared_sql("SELECT id FROM announcements WHERE account_id = $1 AND id = ANY($2)")
            .bind::<SqlUuid, _>(account)
            .bind::<Array<SqlUuid>, _>(ids)
            .load(conn)
            .map_err(store_error)?;
    let existing: std::collections::BTreeSet<Uuid> =
        existing.into_iter().map(|row| row.id).collect();
    counters
        .by_announcement
        .retain(|announcement, _| existing.contains(announcement));
    Ok(())
}

#[derive(diesel::QueryableByName)]
struct Existing {
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
}

/// The slotted columns of `contact_slots`, each with its type and slot, and the value it
/// holds (a string lowered, as every string condition compares it).
macro_rules! slot_pivot {
    () => {
        "max(lower(a.string_value)) FILTER (WHERE m.attribute_type = 'string' AND m.slot = 1), \
         max(lower(a.string_value)) FILTER (WHERE m.attribute_type = 'string' AND m.slot = 2), \
         max(lower(a.string_value)) FILTER (WHERE m.attribute_type = 'string' AND m.slot = 3), \
         max(lower(a.string_value)) FILTER (WHERE m.attribute_type = 'string' AND m.slot = 4), \
         max(a.number_value) FILTER (WHERE m.attribute_type = 'number' AND m.slot = 1), \
         max(a.number_value) FILTER (WHERE m.attribute_type = 'number' AND m.slot = 2), \
         max(a.number_value) FILTER (WHERE m.attribute_type = 'number' AND m.slot = 3), \
         max(a.number_value) FILTER (WHERE m.attribute_type = 'number' AND m.slot = 4), \
         bool_or(a.bool_value) FILTER (WHERE m.attribute_type = 'boolean' AND m.slot = 1), \
         bool_or(a.bool_value) FILTER (WHERE m.attribute_type = 'boolean' AND m.slot = 2), \
         bool_or(a.bool_value) FILTER (WHERE m.attribute_type = 'boolean' AND m.slot = 3), \
         bool_or(a.bool_value) FILTER (WHERE m.attribute_type = 'boolean' AND m.slot = 4), \
         max(a.date_value) FILTER (WHERE m.attribute_type = 'date' AND m.slot = 1), \
         max(a.date_value) FILTER (WHERE m.attribute_type = 'date' AND m.slot = 2), \
         max(a.date_value) FILTER (WHERE m.attribute_type = 'date' AND m.slot = 3), \
         max(a.date_value) FILTER (WHERE m.attribute_type = 'date' AND m.slot = 4)"
    };
}

/// The upsert of the recomputed rows: every column set from the pivot, and a row whose
/// values did not change is not written again.
macro_rules! slot_upsert {
    () => {
        " ON CONFLICT (account_id, contact_id) DO UPDATE SET \
           string_1 = excluded.string_1, string_2 = excluded.string_2, \
           string_3 = excluded.string_3, string_4 = excluded.string_4, \
           number_1 = excluded.number_1, number_2 = excluded.number_2, \
           number_3 = excluded.number_3, number_4 = excluded.number_4, \
           boolean_1 = excluded.boolean_1, boolean_2 = excluded.boolean_2, \
           boolean_3 = excluded.boolean_3, boolean_4 = excluded.boolean_4, \
           date_1 = excluded.date_1, date_2 = excluded.date_2, \
           date_3 = excluded.date_3, date_4 = excluded.date_4 \
         WHERE (s.string_1, s.string_2, s.string_3, s.string_4, \
                s.number_1, s.number_2, s.number_3, s.number_4, \
                s.boolean_1, s.boolean_2, s.boolean_3, s.boolean_4, \
                s.date_1, s.date_2, s.date_3, s.date_4) \
               IS DISTINCT FROM \
               (excluded.string_1, excluded.string_2, excluded.string_3, excluded.string_4, \
                excluded.number_1, excluded.number_2, excluded.number_3, excluded.number_4, \
                excluded.boolean_1, excluded.boolean_2, excluded.boolean_3, excluded.boolean_4, \
                excluded.date_1, excluded.date_2, excluded.date_3, excluded.date_4)"
    };
}

/// Attribute rows as a statement wrote them, one array per column: each row's contact,
/// slug and its one typed value (the others `None`).
pub(crate) struct WrittenValues<'a> {
    pub contacts: &'a [Uuid],
    pub slugs: &'a [String],
    pub strings: &'a [Option<String>],
    pub numbers: &'a [Option<f64>],
    pub booleans: &'a [Option<bool>],
    pub dates: &'a [Option<OffsetDateTime>],
}

/// After a statement of `account` wrote `written` (each (contact, slug) at most once),
/// copies its slotted values into the contacts' `contact_slots` rows: one pivot per
/// contact through the metas' slots, inserted as the contact's row or merged into it (a
/// contact has a row once it has a slotted value). A slot the statement did not write is
/// `NULL` in the pivot and keeps its value: a written value is never `NULL` (one typed
/// column of a row is set, and a slug's type is fixed by its meta), and attribute rows are
/// never deleted alone. From the values the app wrote, so nothing is read back; contacts
/// written no slotted value are not touched. One statement, `account_id` on every table;
/// the row's `account_id` is the meta's column, not the parameter, so Citus runs the
/// whole `INSERT … SELECT` on the account's shard (with the parameter it pulls the rows
/// to the coordinator and pushes them back, and commits in two phases).
pub(crate) fn copy_into_slots(
    conn: &mut PgConnection,
    account: Uuid,
    written: &WrittenValues<'_>,
) -> Result<(), StoreError> {
    if written.contacts.is_empty() {
        return Ok(());
    }
    prepared_sql(concat!(
        "INSERT INTO contact_slots AS s (account_id, contact_id, string_1, string_2, string_3, \
             string_4, number_1, number_2, number_3, number_4, boolean_1, boolean_2, boolean_3, \
             boolean_4, date_1, date_2, date_3, date_4) \
         SELECT m.account_id, a.contact_id, ",
        slot_pivot!(),
        " FROM unnest($2::uuid[], $3::text[], $4::text[], $5::float8[], $6::boolean[], \
                      $7::timestamptz[]) \
              AS a(contact_id, slug, string_value, number_value, bool_value, date_value) \
         JOIN attribute_metas m ON m.account_id = $1 AND m.slug = a.slug AND m.slot IS NOT NULL \
         GROUP BY m.account_id, a.contact_id \
         ORDER BY a.contact_id \
         ON CONFLICT (account_id, contact_id) DO UPDATE SET \
           string_1 = coalesce(excluded.string_1, s.string_1), \
           string_2 = coalesce(excluded.string_2, s.string_2), \
           string_3 = coalesce(excluded.string_3, s.string_3), \
           string_4 = coalesce(excluded.string_4, s.string_4), \
           number_1 = coalesce(excluded.number_1, s.number_1), \
           number_2 = coalesce(excluded.number_2, s.number_2), \
           number_3 = coalesce(excluded.number_3, s.number_3), \
           number_4 = coalesce(excluded.number_4, s.number_4), \
           boolean_1 = coalesce(excluded.boolean_1, s.boolean_1), \
           boolean_2 = coalesce(excluded.boolean_2, s.boolean_2), \
           boolean_3 = coalesce(excluded.boolean_3, s.boolean_3), \
           boolean_4 = coalesce(excluded.boolean_4, s.boolean_4), \
           date_1 = coalesce(excluded.date_1, s.date_1), \
           date_2 = coalesce(excluded.date_2, s.date_2), \
           date_3 = coalesce(excluded.date_3, s.date_3), \
           date_4 = coalesce(excluded.date_4, s.date_4)",
    ))
    .bind::<SqlUuid, _>(account)
    .bind::<Array<SqlUuid>, _>(written.contacts)
    .bind::<Array<Text>, _>(written.slugs)
    .bind::<Array<Nullable<Text>>, _>(written.strings)
    .bind::<Array<Nullable<Float8>>, _>(written.numbers)
    .bind::<Array<Nullable<Bool>>, _>(written.booleans)
    .bind::<Array<Nullable<Timestamptz>>, _>(written.dates)
    .execute(conn)
    .map(drop)
    .map_err(store_error)
}

/// After a meta of `account` took a slot (`slug`, of type `kind`), copies the values its
/// slug already has into the contacts' rows (no code path writes values before their
/// meta; SQL by hand may): the contacts with a value of `slug` recomputed as
/// the pivot of their attribute rows. Found through the partial index of the type's value
/// column, one probe when there are none.
pub(crate) fn fill_new_slot(
    conn: &mut PgConnection,
    account: Uuid,
    slug: &str,
    kind: AttributeType,
) -> Result<(), StoreError> {
    // A closed choice of column names, never input.
    let column = match kind {
        AttributeType::String => "string_value",
        AttributeType::Number => "number_value",
        AttributeType::Boolean => "bool_value",
        AttributeType::Date => "date_value",
    };
    prepared_sql(format!(
        concat!(
            "INSERT INTO contact_slots AS s (account_id, contact_id, string_1, string_2, \
                 string_3, string_4, number_1, number_2, number_3, number_4, boolean_1, \
                 boolean_2, boolean_3, boolean_4, date_1, date_2, date_3, date_4) \
             SELECT a.account_id, a.contact_id, ",
            slot_pivot!(),
            " FROM contact_attributes a \
             JOIN attribute_metas m ON m.account_id = $1 AND m.slug = a.slug \
                                   AND m.slot IS NOT NULL \
             WHERE a.account_id = $1 AND a.contact_id IN (\
                 SELECT w.contact_id FROM contact_attributes w \
                 WHERE w.account_id = $1 AND w.slug = $2 AND w.{column} IS NOT NULL) \
             GROUP BY a.account_id, a.contact_id \
             ORDER BY a.contact_id",
            slot_upsert!(),
        ),
        column = column
    ))
    .bind::<SqlUuid, _>(account)
    .bind::<Text, _>(slug)
    .execute(conn)
    .map(drop)
    .map_err(store_error)
}
