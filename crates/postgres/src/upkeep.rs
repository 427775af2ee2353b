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
//! - the typed slots (`contact_slots`): [`refresh_contact_slots`] after every write of
//!   slotted attribute values, recomputed from the attribute rows.

use std::collections::BTreeMap;

use diesel::{
    pg::PgConnection,
    sql_types::{Array, BigInt, Text, Timestamptz, Uuid as SqlUuid},
    RunQueryDsl,
};
use mailroom_app::StoreError;
use mailroom_domain::message::MessageStatus;
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
/// announcement counters: one statement with `account_id` in it (one shard on Citus),
/// announcements in order, each change added to the row of this backend's slot (two
/// transactions running at once are never in the same backend, so no two writers share a
/// counter row: migration 25). Nothing is written when nothing changed, nor for an
/// announcement that is gone (its counters went with it by cascade).
pub(crate) fn add_to_counters(
    conn: &mut PgConnection,
    account: Uuid,
    counters: &AccountCounters,
) -> Result<(), StoreError> {
    let changed: Vec<(&Uuid, &CounterDeltas)> = counters
        .by_announcement
        .iter()
        .filter(|(_, deltas)| !deltas.is_zero())
        .collect();
    if changed.is_empty() {
        return Ok(());
    }
    let column = |pick: fn(&CounterDeltas) -> i64| -> Vec<i64> {
        changed.iter().map(|(_, deltas)| pick(deltas)).collect()
    };
    prepared_sql(
        "INSERT INTO announcement_counters AS c \
             (account_id, announcement_id, slot, queued, sending, sent, failed, bounced, \
              skipped, opened, clicked) \
         SELECT $1, d.announcement_id, pg_backend_pid(), d.queued, d.sending, d.sent, \
                d.failed, d.bounced, d.skipped, d.opened, d.clicked \
         FROM unnest($2::uuid[], $3::int8[], $4::int8[], $5::int8[], $6::int8[], $7::int8[], \
                     $8::int8[], $9::int8[], $10::int8[]) \
              AS d(announcement_id, queued, sending, sent, failed, bounced, skipped, opened, \
                   clicked) \
         WHERE EXISTS (SELECT 1 FROM announcements a \
                       WHERE a.account_id = $1 AND a.id = d.announcement_id) \
         ORDER BY d.announcement_id \
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
    .bind::<Array<SqlUuid>, _>(changed.iter().map(|(id, _)| **id).collect::<Vec<_>>())
    .bind::<Array<BigInt>, _>(column(|d| d.queued))
    .bind::<Array<BigInt>, _>(column(|d| d.sending))
    .bind::<Array<BigInt>, _>(column(|d| d.sent))
    .bind::<Array<BigInt>, _>(column(|d| d.failed))
    .bind::<Array<BigInt>, _>(column(|d| d.bounced))
    .bind::<Array<BigInt>, _>(column(|d| d.skipped))
    .bind::<Array<BigInt>, _>(column(|d| d.opened))
    .bind::<Array<BigInt>, _>(column(|d| d.clicked))
    .execute(conn)
    .map(drop)
    .map_err(store_error)
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

/// After a write of attribute rows of `account` (`written`: each row's contact and slug),
/// sets the `contact_slots` row of every contact that was written a slotted value to the
/// pivot of its attribute rows through its metas' slots, inserting the row where there is
/// none. Recomputed from the truth, so it is right however the rows were written and
/// idempotent; contacts written only unslotted values are not read. One statement, with
/// `account_id` on every table (one shard on Citus).
pub(crate) fn refresh_contact_slots(
    conn: &mut PgConnection,
    account: Uuid,
    contacts: &[Uuid],
    slugs: &[String],
) -> Result<(), StoreError> {
    if contacts.is_empty() {
        return Ok(());
    }
    prepared_sql(concat!(
        "WITH written AS (\
           SELECT DISTINCT w.contact_id \
           FROM unnest($2::uuid[], $3::text[]) AS w(contact_id, slug) \
           JOIN attribute_metas m ON m.account_id = $1 AND m.slug = w.slug \
                                 AND m.slot IS NOT NULL) \
         INSERT INTO contact_slots AS s (account_id, contact_id, string_1, string_2, string_3, \
             string_4, number_1, number_2, number_3, number_4, boolean_1, boolean_2, boolean_3, \
             boolean_4, date_1, date_2, date_3, date_4) \
         SELECT $1, a.contact_id, ",
        slot_pivot!(),
        " FROM written \
         JOIN contact_attributes a ON a.account_id = $1 AND a.contact_id = written.contact_id \
         JOIN attribute_metas m ON m.account_id = $1 AND m.slug = a.slug AND m.slot IS NOT NULL \
         GROUP BY a.contact_id \
         ORDER BY a.contact_id",
        slot_upsert!(),
    ))
    .bind::<SqlUuid, _>(account)
    .bind::<Array<SqlUuid>, _>(contacts)
    .bind::<Array<Text>, _>(slugs)
    .execute(conn)
    .map(drop)
    .map_err(store_error)
}

/// After metas of `account` took slots (`slugs`), copies the values their slugs already
/// have into the contacts' rows (no code path writes values before their meta; SQL by hand
/// may): the contacts with a row of one of `slugs` recomputed as
/// [`refresh_contact_slots`] does. One index probe per slug when there are none.
pub(crate) fn fill_new_slots(
    conn: &mut PgConnection,
    account: Uuid,
    slugs: &[String],
) -> Result<(), StoreError> {
    if slugs.is_empty() {
        return Ok(());
    }
    prepared_sql(concat!(
        "WITH written AS (\
           SELECT DISTINCT contact_id FROM contact_attributes \
           WHERE account_id = $1 AND slug = ANY($2::text[])) \
         INSERT INTO contact_slots AS s (account_id, contact_id, string_1, string_2, string_3, \
             string_4, number_1, number_2, number_3, number_4, boolean_1, boolean_2, boolean_3, \
             boolean_4, date_1, date_2, date_3, date_4) \
         SELECT $1, a.contact_id, ",
        slot_pivot!(),
        " FROM written \
         JOIN contact_attributes a ON a.account_id = $1 AND a.contact_id = written.contact_id \
         JOIN attribute_metas m ON m.account_id = $1 AND m.slug = a.slug AND m.slot IS NOT NULL \
         GROUP BY a.contact_id \
         ORDER BY a.contact_id",
        slot_upsert!(),
    ))
    .bind::<SqlUuid, _>(account)
    .bind::<Array<Text>, _>(slugs)
    .execute(conn)
    .map(drop)
    .map_err(store_error)
}
