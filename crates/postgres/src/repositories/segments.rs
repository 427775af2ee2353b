//! Audience queries: the contacts of a [`Segment`] and their count.
//!
//! The segment is compiled by [`sql`] into SQL with bound parameters, in one of three
//! shapes ([`SegmentPlan`]), chosen per call from the sizes of the conditions' contact sets
//! (own statistics: each set counted up to [`SMALL_SET`] entries of its index, one
//! statement). The planner's estimates cannot choose here: a value's frequency within one
//! slug is invisible to per-column statistics, so `slug = 'plan' AND lower(value) = 'pro'`
//! is estimated at a hundredth of its size. See docs/design.md, "Audience at scale".
//!
//! A count whose every condition names a slotted attribute and has no small set reads the
//! account's rows of `contact_slots` instead ([`SegmentPlan::Slots`], migration 31): one
//! pass over one typed row per contact, at the pace of a flat table, where intersecting
//! the conditions' sets of attribute rows hashed hundreds of thousands of ids per
//! condition (docs/operations.md, "What lists and counts read"). A page whose every condition names a
//! slotted attribute reads them too, without sizing: a slot column has per-column
//! statistics of its own, so the planner's choice (walk the slot rows in contact order,
//! or read the most selective slot index) rests on true estimates.

mod sql;

use diesel::{
    connection::SimpleConnection, sql_types, Connection, PgConnection, QueryableByName, RunQueryDsl,
};
use mailroom_app::{
    ports::{AudienceBatch, QueuedAudience, SegmentRepository},
    StoreError,
};
use mailroom_domain::{
    attribute::AttributeType,
    condition::{Condition, Segment},
    message::MessageStatus,
    paging::PageRequest,
    AccountId, ContactId,
};
use uuid::Uuid;

pub use self::sql::SlotColumn;
use self::sql::{
    is_equality, is_id_ordered, is_row_condition, is_system_attribute, push_driven,
    push_intersection, push_probed_segment_filter, push_segment_filter, push_slots,
    push_slots_count, set_sizes, Param, Sql,
};
use super::{corrupt, templates::page_bounds, PgUnitOfWork, PlanLine};
use crate::{
    error::store_error,
    prepared_sql::prepared_sql,
    upkeep::{add_to_counters, bring_lanes_forward, AccountCounters, Lanes},
};

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
    conn: &mut PgConnection,
    batch: &AudienceBatch<'_>,
) -> Result<QueuedAudience, StoreError> {
    let row: QueuedRow = under_settings(conn, Some(AUDIENCE_WALK), |conn| {
        audience_batch(batch)
            .into_query()
            .get_result(conn)
            .map_err(store_error)
    })?;
    // The batch's messages wait for a worker from `now`, each `queued`: the account's lane
    // and the announcement's counters, from what the statement wrote.
    if row.queued > 0 {
        let account = batch.account.as_uuid();
        bring_lanes_forward(conn, Lanes::Delivery, [(account, batch.now.as_datetime())])?;
        let mut counters = AccountCounters::default();
        counters.added(
            batch.announcement.as_uuid(),
            MessageStatus::Queued,
            row.queued,
        );
        add_to_counters(conn, account, &counters)?;
    }
    Ok(QueuedAudience {
        contacts: u64::try_from(row.contacts).map_err(|e| corrupt("audience count", e))?,
        queued: u64::try_from(row.queued).map_err(|e| corrupt("queued count", e))?,
        last: row.last.map(ContactId::from_uuid),
    })
}

/// The plan of [`queue_audience_batch`]'s statement for `batch` (`EXPLAIN`, not run), one
/// line per row, for tests.
///
/// # Errors
/// [`StoreError`] when the statement fails.
pub fn explain_audience_batch(
    conn: &mut PgConnection,
    batch: &AudienceBatch<'_>,
) -> Result<Vec<String>, StoreError> {
    let mut sql = audience_batch(batch);
    sql.text.insert_str(0, "EXPLAIN ");
    // In a transaction of its own (a savepoint inside the caller's), so the settings'
    // `SET LOCAL` holds whether or not the caller opened one, and ends with it.
    let rows: Vec<PlanLine> = conn
        .transaction::<_, diesel::result::Error, _>(|conn| {
            conn.batch_execute(AUDIENCE_WALK.0)?;
            sql.into_query().load(conn)
        })
        .map_err(store_error)?;
    Ok(rows.into_iter().map(|row| row.line).collect())
}

/// Planner settings that hold a batch to the walk [`audience_batch`] is written for, and
/// the statement that restores them. Its cost estimates favour the walk only while the
/// rest of the account is large against the batch: for a late batch of an audience
/// stored with half of each page free (migration 37), the planner read the remaining
/// contacts by a bitmap scan, every condition probed, and sorted them to keep one batch
/// (docs/performance.md, "Design choices, measured"). With bitmap scans
/// and sequential scans off, the primary key's ordered scan is the plan left.
///
/// Sorts stay on, and JIT goes off: a plan that cannot avoid a disabled node (the batch's
/// last contact is found by a sort) costs 10^10 more,
/// far over `jit_above_cost`, and compiling its expressions took about a second per
/// batch.
const AUDIENCE_WALK: (&str, &str) = (
    "SET LOCAL enable_bitmapscan = off; SET LOCAL enable_seqscan = off; SET LOCAL jit = off",
    "SET LOCAL enable_bitmapscan TO DEFAULT; SET LOCAL enable_seqscan TO DEFAULT; \
     SET LOCAL jit TO DEFAULT",
);

/// The statement of one batch. The contacts are walked in id order from `after` through
/// the primary key, each condition probed per contact ([`push_probed_segment_filter`]):
/// a batch reads the contacts it passes, wherever it is in the audience. Left to the
/// planner (which estimates a condition's set at a hundredth of its size), later batches
/// read the condition's whole set, since `contacts.id > after` does not bound it: a hash
/// of all 500,000 matching ids at 1,000,000 contacts joined with the rest of the account
/// and sorted to keep 5,000, or a nested loop over the set from its start: about ten
/// times the walk's time per batch (docs/performance.md, "Design choices, measured").
fn audience_batch(batch: &AudienceBatch<'_>) -> Sql {
    let mut sql = Sql::default();
    sql.push(
        "WITH audience AS MATERIALIZED (\
           SELECT contacts.id, contacts.email, \
                  row_number() OVER (ORDER BY contacts.id) AS n \
           FROM (SELECT contacts.id, contacts.email FROM contacts WHERE ",
    );
    push_probed_segment_filter(&mut sql, batch.account, batch.segment);
    // A contact waiting for its double opt-in confirmation is not in any audience
    // (docs/api-decisions.md, "Subscribe forms and double opt-in").
    sql.push(" AND contacts.pending_since IS NULL");
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
           ON CONFLICT (account_id, announcement_id, contact_id) \
               WHERE announcement_id IS NOT NULL DO NOTHING \
           RETURNING 1\
         ) \
         SELECT (SELECT count(*) FROM audience) AS contacts, \
                (SELECT count(*) FROM inserted) AS queued, \
                (SELECT id FROM audience ORDER BY n DESC LIMIT 1) AS last"
    ));
    sql
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

#[derive(QueryableByName)]
struct SizesRow {
    #[diesel(sql_type = sql_types::Array<sql_types::BigInt>)]
    sizes: Vec<i64>,
}

/// A condition's set with fewer contacts than this is small enough to drive a count: the
/// other conditions are probed per contact (a few microseconds each) instead of read whole.
pub const SMALL_SET: i64 = 5_000;
/// The same for a page of a search, which needs only the first matches: sizing must cost
/// less than the page (500 index entries per condition is well under a millisecond).
const SMALL_SET_FOR_A_PAGE: i64 = 500;
/// At most this many sets are intersected (each join may hold a hash table); a segment
/// with more conditions takes the general plan.
const MAX_INTERSECTED: usize = 8;

/// How the contacts of a segment are found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SegmentPlan {
    /// Every contact of the account in id order, each condition checked per contact
    /// (`EXISTS` on `contact_attributes`). Serves any segment; the planner picks joins.
    General,
    /// The set of condition `driver` (small: under [`SMALL_SET`]) read once from its index,
    /// every other condition probed per contact through the primary key.
    Driven {
        /// Index of the driving condition in `segment.conditions`.
        driver: usize,
    },
    /// The sets of every condition read from their indexes and intersected by hash joins,
    /// in `order` (smaller sets first). For counts when no set is small.
    Intersection {
        /// Condition indexes, smallest set first.
        order: Vec<usize>,
    },
    /// Every condition checked on the account's rows of `contact_slots` (one typed row per
    /// contact) when every condition's slug has a slot: for pages always, for counts when
    /// no set is small.
    Slots {
        /// The slot of each condition's slug, in `segment.conditions` order.
        slots: Vec<SlotColumn>,
    },
}

/// What the plan is for: a count, or a page in id order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    Count,
    Search,
}

/// Chooses the plan from the conditions' set sizes (counted up to [`SMALL_SET`]) and, for
/// a count, the conditions' slots.
fn choose_plan(
    conn: &mut PgConnection,
    account: AccountId,
    segment: &Segment,
    purpose: Purpose,
) -> Result<SegmentPlan, StoreError> {
    let conditions = &segment.conditions;
    // An engagement condition is a column of `contacts` or a probe of the contact's
    // messages: only the general plan, which walks contacts, asks it.
    if conditions.is_empty()
        || conditions
            .iter()
            .any(|condition| matches!(condition, Condition::Engagement(_)))
    {
        return Ok(SegmentPlan::General);
    }
    // A count that cannot be driven by a small set reads the slots when it may.
    let slots_or = |conn: &mut PgConnection, otherwise: SegmentPlan| match purpose {
        Purpose::Count => Ok(slot_plan(conn, account, segment)?.unwrap_or(otherwise)),
        Purpose::Search => Ok(otherwise),
    };
    // A page whose every condition has a slot walks the slot rows like a flat table (a
    // prepared lookup of the metas instead of sizing every condition's set, which cost
    // the first page more than the walk; docs/performance.md, "Design choices, measured").
    if purpose == Purpose::Search {
        if let Some(plan) = slot_plan(conn, account, segment)? {
            return Ok(plan);
        }
    }
    if conditions.len() > MAX_INTERSECTED || !conditions.iter().all(is_row_condition) {
        return slots_or(conn, SegmentPlan::General);
    }
    let cap = match purpose {
        Purpose::Count => SMALL_SET,
        Purpose::Search => SMALL_SET_FOR_A_PAGE,
    };
    let row: SizesRow = set_sizes(account, segment, cap)
        .into_query()
        .get_result(conn)
        .map_err(store_error)?;
    let mut order: Vec<usize> = (0..conditions.len()).collect();
    // Smallest first; among sets at the cap, equality before ranges.
    order.sort_by_key(|&index| (row.sizes[index], !is_equality(&conditions[index]), index));
    let smallest = order[0];
    if row.sizes[smallest] < cap {
        return Ok(SegmentPlan::Driven { driver: smallest });
    }
    match purpose {
        Purpose::Count => slots_or(conn, SegmentPlan::Intersection { order }),
        // A page of large sets: walk a set whose index yields contact ids in order (an
        // equality), stopping at the page's end; without one, walk contacts in id order.
        Purpose::Search => Ok(order
            .iter()
            .copied()
            .find(|&index| is_id_ordered(&conditions[index]))
            .map_or(SegmentPlan::General, |driver| SegmentPlan::Driven {
                driver,
            })),
    }
}

#[derive(QueryableByName)]
struct SlotRow {
    #[diesel(sql_type = sql_types::Text)]
    slug: String,
    #[diesel(sql_type = sql_types::Text)]
    attribute_type: String,
    #[diesel(sql_type = sql_types::Nullable<sql_types::SmallInt>)]
    slot: Option<i16>,
}

/// [`SegmentPlan::Slots`] for `segment` when every condition names a custom attribute
/// whose slug has a slot and asks for a value (any operator but `not_exists`: a contact
/// without slotted values has no slot row); `None` otherwise (`not_exists`, a system
/// attribute, an `event.*` date, a slug beyond the first four of its type, or one never
/// written, which has no meta).
///
/// # Errors
/// [`StoreError`] when the lookup fails or a stored slot is out of range.
pub fn slot_plan(
    conn: &mut PgConnection,
    account: AccountId,
    segment: &Segment,
) -> Result<Option<SegmentPlan>, StoreError> {
    if segment.conditions.is_empty()
        || segment.conditions.iter().any(|condition| {
            is_system_attribute(condition.slug())
                || matches!(
                    condition,
                    Condition::NotExists { .. } | Condition::Engagement(_)
                )
        })
    {
        return Ok(None);
    }
    let slugs: Vec<&str> = segment.conditions.iter().map(Condition::slug).collect();
    let rows: Vec<SlotRow> = prepared_sql(
        "SELECT slug, attribute_type, slot FROM attribute_metas \
         WHERE account_id = $1 AND slug = ANY($2)",
    )
    .bind::<sql_types::Uuid, _>(account.as_uuid())
    .bind::<sql_types::Array<sql_types::Text>, _>(&slugs)
    .load(conn)
    .map_err(store_error)?;
    let mut slots = Vec::with_capacity(slugs.len());
    for slug in slugs {
        let Some(row) = rows.iter().find(|row| row.slug == slug) else {
            return Ok(None);
        };
        let Some(slot) = row.slot else {
            return Ok(None);
        };
        let attribute_type = AttributeType::parse(&row.attribute_type)
            .ok_or_else(|| corrupt("attribute_metas.attribute_type", &row.attribute_type))?;
        let slot = u8::try_from(slot)
            .ok()
            .filter(|slot| (1..=4).contains(slot))
            .ok_or_else(|| corrupt("attribute_metas.slot", slot))?;
        slots.push(SlotColumn {
            attribute_type,
            slot,
        });
    }
    Ok(Some(SegmentPlan::Slots { slots }))
}

/// Planner settings that make PostgreSQL run `plan` as built, for the rest of the current
/// transaction, and the statement that restores them. The planner's own choice rests on
/// estimates that are wrong for attribute rows (see the module documentation).
///
/// A page needs none: its subqueries are written to be probed per contact
/// (`sql::Subqueries::Probed`), which keeps the page at its two statements (sizing and
/// page) instead of four.
fn plan_settings(plan: &SegmentPlan, purpose: Purpose) -> Option<(&'static str, &'static str)> {
    match (plan, purpose) {
        // Any segment's count, and one pass over the slots: the planner's choice (its
        // statistics of the slot columns are per attribute, so its estimates hold).
        (SegmentPlan::General | SegmentPlan::Slots { .. }, Purpose::Count) => None,
        // A page: probed subqueries (a first page took 7 s when the planner hashed whole
        // sets, under 1 ms probed), no statement.
        (_, Purpose::Search) => None,
        // Probes through the primary key, never a hash of a whole other set, and no
        // parallel workers: starting them costs more than a driven count.
        (SegmentPlan::Driven { .. }, Purpose::Count) => Some((
            "SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off; \
             SET LOCAL max_parallel_workers_per_gather = 0",
            "SET LOCAL enable_hashjoin TO DEFAULT; SET LOCAL enable_mergejoin TO DEFAULT; \
             SET LOCAL max_parallel_workers_per_gather TO DEFAULT",
        )),
        // Hash joins in the written order; a 500k-id hash table fits 32 MB without
        // spilling to disk.
        (SegmentPlan::Intersection { .. }, Purpose::Count) => Some((
            "SET LOCAL join_collapse_limit = 1; SET LOCAL enable_nestloop = off; \
             SET LOCAL enable_mergejoin = off; SET LOCAL work_mem = '32MB'",
            "SET LOCAL join_collapse_limit TO DEFAULT; SET LOCAL enable_nestloop TO DEFAULT; \
             SET LOCAL enable_mergejoin TO DEFAULT; SET LOCAL work_mem TO DEFAULT",
        )),
    }
}

/// Runs `query` under the planner settings of `plan`, restoring them afterwards (the
/// transaction may go on with other statements).
fn under_plan<R>(
    conn: &mut PgConnection,
    plan: &SegmentPlan,
    purpose: Purpose,
    query: impl FnOnce(&mut PgConnection) -> Result<R, StoreError>,
) -> Result<R, StoreError> {
    under_settings(conn, plan_settings(plan, purpose), query)
}

/// Runs `query` after the `SET LOCAL` statement of `settings` and restores them with its
/// second statement afterwards (the transaction may go on with other statements). Must
/// run inside a transaction: outside one, `SET LOCAL` has no effect.
fn under_settings<R>(
    conn: &mut PgConnection,
    settings: Option<(&str, &str)>,
    query: impl FnOnce(&mut PgConnection) -> Result<R, StoreError>,
) -> Result<R, StoreError> {
    let Some((set, reset)) = settings else {
        return query(conn);
    };
    conn.batch_execute(set).map_err(store_error)?;
    let outcome = query(conn);
    if outcome.is_ok() {
        conn.batch_execute(reset).map_err(store_error)?;
    }
    outcome
}

/// The ids of the segment's contacts in id order, one page, with `plan` (any plan gives
/// the same answer; the property test in `crates/postgres/tests/segments.rs` runs all).
///
/// # Errors
/// [`StoreError`] when a statement fails.
pub fn search_segment_with(
    conn: &mut PgConnection,
    account: AccountId,
    segment: &Segment,
    page: PageRequest,
    after: Option<ContactId>,
    plan: &SegmentPlan,
) -> Result<Vec<ContactId>, StoreError> {
    let (offset, limit) = page_bounds(page);
    let mut sql = Sql::default();
    let id = match plan {
        SegmentPlan::General => {
            sql.push("SELECT contacts.id FROM contacts WHERE ");
            push_probed_segment_filter(&mut sql, account, segment);
            "contacts.id"
        }
        SegmentPlan::Driven { driver } => {
            sql.push("SELECT d.contact_id AS id ");
            push_driven(&mut sql, account, segment, *driver);
            "d.contact_id"
        }
        SegmentPlan::Intersection { order } => {
            sql.push("SELECT s0.contact_id AS id ");
            push_intersection(&mut sql, account, segment, order);
            "s0.contact_id"
        }
        SegmentPlan::Slots { slots } => {
            sql.push("SELECT s.contact_id AS id ");
            push_slots(&mut sql, account, segment, slots);
            "s.contact_id"
        }
    };
    if let Some(after) = after {
        let after = sql.bind(Param::Uuid(after.as_uuid()));
        sql.push(&format!(" AND {id} > {after}"));
    }
    // Id order is stable for paging and lets an expansion resume after the last id.
    let offset = sql.bind(Param::BigInt(offset));
    let limit = sql.bind(Param::BigInt(limit));
    sql.push(&format!(" ORDER BY {id} OFFSET {offset} LIMIT {limit}"));
    let rows: Vec<IdRow> = under_plan(conn, plan, Purpose::Search, |conn| {
        sql.into_query().load(conn).map_err(store_error)
    })?;
    Ok(rows
        .into_iter()
        .map(|row| ContactId::from_uuid(row.id))
        .collect())
}

/// How many contacts the segment holds, with `plan`.
///
/// # Errors
/// [`StoreError`] when a statement fails.
pub fn count_segment_with(
    conn: &mut PgConnection,
    account: AccountId,
    segment: &Segment,
    plan: &SegmentPlan,
) -> Result<u64, StoreError> {
    let mut sql = Sql::default();
    match plan {
        SegmentPlan::General => {
            sql.push("SELECT count(*) AS count FROM contacts WHERE ");
            push_segment_filter(&mut sql, account, segment);
        }
        SegmentPlan::Driven { driver } => {
            sql.push("SELECT count(*) AS count ");
            push_driven(&mut sql, account, segment, *driver);
        }
        SegmentPlan::Intersection { order } => {
            sql.push("SELECT count(*) AS count ");
            push_intersection(&mut sql, account, segment, order);
        }
        SegmentPlan::Slots { slots } => push_slots_count(&mut sql, account, segment, slots),
    }
    let row: CountRow = under_plan(conn, plan, Purpose::Count, |conn| {
        sql.into_query().get_result(conn).map_err(store_error)
    })?;
    u64::try_from(row.count).map_err(|e| corrupt("segment count", e))
}

/// The plan [`SegmentRepository::count_segment`] would take for `segment`, for tests and
/// the benchmark.
///
/// # Errors
/// [`StoreError`] when the sizing statement fails.
pub fn count_plan(
    conn: &mut PgConnection,
    account: AccountId,
    segment: &Segment,
) -> Result<SegmentPlan, StoreError> {
    choose_plan(conn, account, segment, Purpose::Count)
}

/// The plan [`SegmentRepository::search_segment`] would take for a page of `segment`, for
/// tests and the benchmark.
///
/// # Errors
/// [`StoreError`] when the slot lookup or the sizing statement fails.
pub fn search_plan(
    conn: &mut PgConnection,
    account: AccountId,
    segment: &Segment,
) -> Result<SegmentPlan, StoreError> {
    choose_plan(conn, account, segment, Purpose::Search)
}

impl SegmentRepository for PgUnitOfWork<'_> {
    fn search_segment(
        &mut self,
        account: AccountId,
        segment: &Segment,
        page: PageRequest,
        after: Option<ContactId>,
    ) -> Result<Vec<ContactId>, StoreError> {
        let plan = choose_plan(self.conn, account, segment, Purpose::Search)?;
        search_segment_with(self.conn, account, segment, page, after, &plan)
    }

    fn count_segment(&mut self, account: AccountId, segment: &Segment) -> Result<u64, StoreError> {
        let plan = choose_plan(self.conn, account, segment, Purpose::Count)?;
        count_segment_with(self.conn, account, segment, &plan)
    }
}
