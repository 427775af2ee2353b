use std::collections::{HashMap, HashSet};

use diesel::{
    dsl::sql,
    pg::Pg,
    prelude::*,
    query_builder::{BoxedSqlQuery, SqlQuery},
    sql_types::{BigInt, Bool, Integer, Text},
    upsert::excluded,
};
use mailroom_app::{
    ports::{ContactEvent, ContactRepository, EventName, EventOfEmail, RecordedEvent},
    StoreError,
};
use mailroom_domain::{
    attribute::{
        AttributeMeta, AttributeSource, AttributeType, AttributeValue, ResolvedAttributes,
        MAX_CUSTOM_ATTRIBUTES,
    },
    contact::{Contact, ContactQuery, ContactSort, StatusFilter},
    email::EmailAddress,
    message::MessageStatus,
    paging::PageRequest,
    slug::EventSlug,
    AccountId, ContactEventId, ContactId, Timestamp, TopicId,
};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{contains_pattern, corrupt, templates::page_bounds, timestamp, PgUnitOfWork, PlanLine};
use crate::{
    error::store_error,
    prepared_sql::prepared_sql,
    schema::{
        attribute_metas, contact_attributes, contact_events, contacts, topic_unsubscriptions,
    },
    upkeep::{
        add_to_counters, copy_into_slots, fill_new_slot, of_existing_announcements,
        AccountCounters, WrittenValues,
    },
};

#[derive(Queryable, QueryableByName, Selectable)]
#[diesel(table_name = contacts, check_for_backend(Pg))]
struct ContactRow {
    id: Uuid,
    email: String,
    created_at: OffsetDateTime,
    hard_bounced_at: Option<OffsetDateTime>,
    complaint_at: Option<OffsetDateTime>,
    unsubscribed_at: Option<OffsetDateTime>,
    message_count: i32,
    pending_since: Option<OffsetDateTime>,
    confirmed_at: Option<OffsetDateTime>,
}

impl ContactRow {
    fn into_contact(self, topic_unsubscriptions: Vec<TopicId>) -> Contact {
        Contact {
            id: ContactId::from_uuid(self.id),
            email: self.email,
            created_at: timestamp(self.created_at),
            hard_bounced_at: self.hard_bounced_at.map(timestamp),
            complaint_at: self.complaint_at.map(timestamp),
            unsubscribed_at: self.unsubscribed_at.map(timestamp),
            topic_unsubscriptions,
            message_count: u32::try_from(self.message_count).unwrap_or(0),
            pending_since: self.pending_since.map(timestamp),
            confirmed_at: self.confirmed_at.map(timestamp),
        }
    }
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = contact_attributes, check_for_backend(Pg))]
struct AttributeRow {
    account_id: Uuid,
    contact_id: Uuid,
    slug: String,
    string_value: Option<String>,
    number_value: Option<f64>,
    bool_value: Option<bool>,
    date_value: Option<OffsetDateTime>,
}

impl AttributeRow {
    fn value(&self) -> Result<AttributeValue, StoreError> {
        match (
            &self.string_value,
            self.number_value,
            self.bool_value,
            self.date_value,
        ) {
            (Some(text), None, None, None) => Ok(AttributeValue::String(text.clone())),
            (None, Some(number), None, None) => Ok(AttributeValue::Number(number)),
            (None, None, Some(flag), None) => Ok(AttributeValue::Boolean(flag)),
            (None, None, None, Some(at)) => Ok(AttributeValue::Date(timestamp(at))),
            _ => Err(corrupt("contact_attributes", &self.slug)),
        }
    }
}

fn attribute_row(
    account: AccountId,
    contact: ContactId,
    slug: &str,
    value: &AttributeValue,
) -> AttributeRow {
    let mut row = AttributeRow {
        account_id: account.as_uuid(),
        contact_id: contact.as_uuid(),
        slug: slug.to_owned(),
        string_value: None,
        number_value: None,
        bool_value: None,
        date_value: None,
    };
    match value {
        AttributeValue::String(text) => row.string_value = Some(text.clone()),
        AttributeValue::Number(number) => row.number_value = Some(*number),
        AttributeValue::Boolean(flag) => row.bool_value = Some(*flag),
        AttributeValue::Date(at) => row.date_value = Some(at.as_datetime()),
    }
    row
}

/// The filters shared by the list and its count; `email` takes precedence over `search`.
fn filtered(account: AccountId, query: &ContactQuery) -> contacts::BoxedQuery<'static, Pg> {
    filtered_as(account, query, NeedleFilter::Like)
}

/// How the email-substring filter is written; both select the same contacts.
#[derive(Clone, Copy)]
enum NeedleFilter {
    /// `LIKE '%…%'`, which the trigram index can serve and whose estimate follows the
    /// column's statistics.
    Like,
    /// `strpos(…) > 0`, which no index serves and which the planner estimates at a third
    /// of the rows: with a `LIMIT` it always walks the sort index, stopping at the page's
    /// end (docs/console.md, "The email filter's plan").
    Strpos,
}

fn filtered_as(
    account: AccountId,
    query: &ContactQuery,
    needle: NeedleFilter,
) -> contacts::BoxedQuery<'static, Pg> {
    let mut select = contacts::table
        .filter(contacts::account_id.eq(account.as_uuid()))
        .into_boxed();
    if let Some(email) = &query.email {
        select = select.filter(contacts::email_lower.eq(email.to_lowercase()));
    } else if let Some(search) = &query.search {
        select = match needle {
            // LIKE rather than strpos so that the trigram index (migration 26) can serve
            // it; the needle is escaped so that it still matches literally, as strpos does.
            NeedleFilter::Like => select.filter(
                sql::<Bool>("email_lower LIKE ")
                    .bind::<Text, _>(contains_pattern(&search.to_lowercase()))
                    .sql(LIKE_ESCAPE),
            ),
            NeedleFilter::Strpos => select.filter(
                sql::<Bool>("strpos(email_lower, ")
                    .bind::<Text, _>(search.to_lowercase())
                    .sql(") > 0"),
            ),
        };
    }
    match query.status {
        Some(StatusFilter::Bounced) => {
            select = select.filter(contacts::hard_bounced_at.is_not_null())
        }
        Some(StatusFilter::Unsubscribed) => {
            select = select.filter(contacts::unsubscribed_at.is_not_null())
        }
        None => {}
    }
    select
}

/// The end of the `LIKE` condition: E'' so the escape character reads the same whatever
/// standard_conforming_strings says.
const LIKE_ESCAPE: &str = " ESCAPE E'\\\\'";

/// The `AND …` of the status filter, as raw SQL for the statements written by hand.
fn status_sql(status: Option<StatusFilter>) -> &'static str {
    match status {
        Some(StatusFilter::Bounced) => " AND hard_bounced_at IS NOT NULL",
        Some(StatusFilter::Unsubscribed) => " AND unsubscribed_at IS NOT NULL",
        None => "",
    }
}

/// The list's `ORDER BY` as raw SQL, the same order as the boxed query's in
/// `list_contacts` (the tests in `crates/postgres/tests/contact_list_indexes.rs` compare
/// the two).
fn order_sql(sort: ContactSort, ascending: bool) -> String {
    let (key, nulls) = match sort {
        ContactSort::CreateDate => ("created_at", ""),
        ContactSort::Email => ("email_lower", ""),
        ContactSort::MessageCount => ("message_count", ""),
        // Contacts without a name come last in both directions.
        ContactSort::Name => ("sort_name", " NULLS LAST"),
        ContactSort::Status => (STATUS_RANK, ""),
    };
    let desc = if ascending { "" } else { " DESC" };
    format!("{key}{desc}{nulls}, id{desc}")
}

/// Below this many matching contacts the email filter reads them all through the trigram
/// index and sorts them; from this many on it walks the sort index, which then finds a
/// page's worth early. Reading and sorting fewer than this stays well inside a page's
/// time at a million contacts (docs/console.md, "The email filter's plan", has the
/// figures).
pub const FEW_MATCHES: i64 = 20_000;

/// How many contacts, in the list's order, the email filter checks first: when a page's
/// worth of them match (a needle many contacts contain), that is the page, found in a few
/// milliseconds without counting (docs/console.md, "The email filter's plan").
const WALK_FIRST: i64 = 5_000;

/// How the contact list runs an email-substring filter (docs/console.md, "The email
/// filter's plan"). Both give the same page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContactSearchPlan {
    /// Every match through the needle's [`Lookup`] (the trigram index,
    /// `contacts_email_trgm_idx`; for one character the character index,
    /// `contacts_email_chars_idx`), then sorted.
    Trigram,
    /// The sort index walked in order, each contact checked, until the page is full
    /// (for a needle without a trigram: the planner's choice, as before).
    Walk,
}

/// Whether pg_trgm surely extracts a trigram from the `LIKE` pattern of `needle`: three
/// ASCII letters or digits in a row (pg_trgm's word characters; non-ASCII ones depend on
/// the database's locale, so they do not count). Without one, a trigram lookup is a
/// scan of the whole index.
fn has_trigram(needle: &str) -> bool {
    let mut run = 0;
    for c in needle.chars() {
        run = if c.is_ascii_alphanumeric() {
            run + 1
        } else {
            0
        };
        if run >= 3 {
            return true;
        }
    }
    false
}

/// The part of `needle` to look up in the trigram index: up to its first `@` when that
/// part has a trigram, else all of it. GIN reads every trigram's list of contacts, and a
/// domain's trigrams are in most of them, so a whole address reads most of the index
/// where its local part reads a few lists (docs/console.md, "The email filter's plan",
/// has the figures). The whole needle is checked on the rows found.
fn indexed_part(needle: &str) -> &str {
    match needle.find('@') {
        Some(at) if has_trigram(&needle[..at]) => &needle[..=at],
        _ => needle,
    }
}

/// How the trigram index (`contacts_email_trgm_idx`, migration 26) or the character index
/// (`contacts_email_chars_idx`, migration 33) can find every contact whose address
/// contains a needle (lower case); `None` when neither can (then the list keeps the
/// planner's choice: docs/console.md, "Short needles").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lookup<'a> {
    /// `email_lower LIKE '%part%'` for the needle's [`indexed_part`], which has a trigram.
    Like(&'a str),
    /// Two ASCII letters or digits, `zq`: pg_trgm pads and splits words at every
    /// character that is not a letter or digit, so an address of printable ASCII contains
    /// `zq` exactly when it has a trigram `zq` + a letter or digit, or `zq ` (the end of a
    /// word). `email_lower ~ 'zq[ -~]'` looks up the one and `LIKE '%zq'` the other (a
    /// `$` in the expression would look up nothing); the addresses with any other
    /// character come from migration 32's partial index (docs/console.md, "Short
    /// needles").
    Pair(&'a str),
    /// One character, any (`z`, `ü`, `%`): migration 33's GIN index holds the characters
    /// of every address ([`EMAIL_CHARS`]), so `EMAIL_CHARS @> ARRAY['z']` finds exactly
    /// the addresses that contain it, whatever the character and the locale
    /// (docs/console.md, "Short needles").
    Char(&'a str),
}

/// The characters of `email_lower`, one array element each (duplicates too: GIN keeps
/// each key once per row), as migration 33's `contacts_email_chars_idx` indexes them.
/// PostgreSQL uses an expression index only for a statement that repeats its
/// expression: change both together.
const EMAIL_CHARS: &str = "string_to_array(email_lower, NULL)";

/// The lookup for `needle` (already lower case), if an index can serve it.
fn lookup(needle: &str) -> Option<Lookup<'_>> {
    if has_trigram(needle) {
        Some(Lookup::Like(indexed_part(needle)))
    } else if needle.len() == 2 && needle.bytes().all(|b| b.is_ascii_alphanumeric()) {
        Some(Lookup::Pair(needle))
    } else if needle.chars().count() == 1 {
        Some(Lookup::Char(needle))
    } else {
        None
    }
}

/// The addresses that a [`Lookup::Pair`] cannot find through trigrams: any character
/// outside printable ASCII (an internationalised domain, `bücher.example`: pg_trgm asks
/// the C library whether `ü` is a letter, which in `C.UTF-8` it is, so `zqü` gives a
/// trigram of its own; in `C` it would end the word). Migration 32's
/// `contacts_email_outside_ascii_idx` is a partial index with this very predicate, which
/// PostgreSQL uses only when the statement repeats it character for character: change
/// both together.
const OUTSIDE_ASCII: &str = "email_lower ~ '[^ -~]'";

/// The `WHERE` of the statements that read the matches through the trigram index, binding
/// `$2` ([`lookup_pattern`]) and `$3` (the whole needle, checked on every row found).
fn trigram_filter(lookup: Lookup<'_>, status: Option<StatusFilter>) -> String {
    let found = match lookup {
        Lookup::Like(_) => format!("email_lower LIKE $2{LIKE_ESCAPE}"),
        // The needle is two letters or digits: nothing in it for LIKE to escape.
        Lookup::Pair(_) => {
            format!("(email_lower ~ $2 OR email_lower LIKE ('%' || $3) OR {OUTSIDE_ASCII})")
        }
        // No pattern: the character is an array element, compared as it is.
        Lookup::Char(_) => format!("{EMAIL_CHARS} @> ARRAY[$2]"),
    };
    format!(
        "account_id = $1 AND {found} AND strpos(email_lower, $3) > 0{}",
        status_sql(status)
    )
}

/// What [`trigram_filter`] binds to `$2`: the `LIKE` pattern, the regular expression of a
/// [`Lookup::Pair`] (letters or digits: nothing in it to escape), or the character of a
/// [`Lookup::Char`] as it is.
fn lookup_pattern(lookup: Lookup<'_>) -> String {
    match lookup {
        Lookup::Like(part) => contains_pattern(part),
        Lookup::Pair(pair) => format!("{pair}[ -~]"),
        Lookup::Char(char) => char.to_owned(),
    }
}

/// What `record_event`'s statement returns.
#[derive(QueryableByName)]
struct RecordedEventRow {
    /// `NULL` when nothing was written (see `record_event_once`).
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Uuid>)]
    id: Option<Uuid>,
    #[diesel(sql_type = Bool)]
    triggers: bool,
}

/// What the capped count returns.
#[derive(QueryableByName)]
struct CountRow {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// The page from the first [`WALK_FIRST`] contacts in the list's order, when they hold
/// all of it or are all the account's contacts (`None` when there are more and they hold
/// fewer than `offset + limit` matches). Its rows are then exactly the full list's: the
/// matches before them come first in the same order. The subquery's `LIMIT` makes the
/// planner walk the sort index, stopping at the page.
///
/// An account of fewer contacts is answered here whatever the needle: the trigram index
/// holds every account's addresses, so looking a needle up costs as many entries as the
/// whole table has matches (for a pair common in other accounts, a large share of the
/// table; docs/console.md, "Short needles"), while these few contacts are already read.
fn walk_first(
    conn: &mut PgConnection,
    account: AccountId,
    query: &ContactQuery,
    page: PageRequest,
) -> Result<Option<Vec<ContactRow>>, StoreError> {
    let Some(search) = query.search.as_ref().filter(|_| query.email.is_none()) else {
        return Ok(None);
    };
    if lookup(&search.to_lowercase()).is_none() {
        // The plan is the walk anyway, which stops as early as this one would.
        return Ok(None);
    }
    let (offset, limit) = page_bounds(page);
    let order = order_sql(query.sort, query.ascending);
    let rows: Vec<ContactRow> = diesel::sql_query(format!(
        "SELECT id, email, created_at, hard_bounced_at, complaint_at, unsubscribed_at, \
         message_count, pending_since, confirmed_at \
         FROM (SELECT * FROM contacts WHERE account_id = $1{status} \
         ORDER BY {order} LIMIT $2) w WHERE strpos(email_lower, $3) > 0 \
         ORDER BY {order} OFFSET $4 LIMIT $5",
        status = status_sql(query.status),
    ))
    .bind::<diesel::sql_types::Uuid, _>(account.as_uuid())
    .bind::<BigInt, _>(WALK_FIRST)
    .bind::<Text, _>(search.to_lowercase())
    .bind::<BigInt, _>(offset)
    .bind::<BigInt, _>(limit)
    .load(conn)
    .map_err(store_error)?;
    if i64::try_from(rows.len()).unwrap_or(i64::MAX) >= limit {
        return Ok(Some(rows));
    }
    // Not a full page: were those all the account's contacts? (An index-only scan of at
    // most WALK_FIRST entries.)
    let walked: CountRow = diesel::sql_query(format!(
        "SELECT count(*) AS n FROM (SELECT 1 FROM contacts WHERE account_id = $1{status} \
         LIMIT $2) w",
        status = status_sql(query.status),
    ))
    .bind::<diesel::sql_types::Uuid, _>(account.as_uuid())
    .bind::<BigInt, _>(WALK_FIRST)
    .get_result(conn)
    .map_err(store_error)?;
    Ok((walked.n < WALK_FIRST).then_some(rows))
}

/// The capped count of [`contact_search_plan`], after `prefix` (`EXPLAIN ` in the tests).
fn count_statement(
    prefix: &str,
    account: AccountId,
    lookup: Lookup<'_>,
    needle: &str,
    status: Option<StatusFilter>,
) -> BoxedSqlQuery<'static, Pg, SqlQuery> {
    diesel::sql_query(format!(
        "{prefix}WITH matches AS MATERIALIZED (SELECT 1 FROM contacts WHERE {filter}) \
         SELECT count(*) AS n FROM (SELECT 1 FROM matches LIMIT $4) capped",
        filter = trigram_filter(lookup, status),
    ))
    .into_boxed()
    .bind::<diesel::sql_types::Uuid, _>(account.as_uuid())
    .bind::<Text, _>(lookup_pattern(lookup))
    .bind::<Text, _>(needle.to_owned())
    .bind::<BigInt, _>(FEW_MATCHES)
}

/// The page read through the trigram index ([`ContactSearchPlan::Trigram`]), after
/// `prefix` (`EXPLAIN ` in the tests). OFFSET 0 keeps PostgreSQL from merging the subquery
/// into the sorted query, so it is planned to read all its rows (the trigram index: few
/// match) instead of walking the sort index with the filter.
fn trigram_read_statement(
    prefix: &str,
    account: AccountId,
    lookup: Lookup<'_>,
    needle: &str,
    query: &ContactQuery,
    page: PageRequest,
) -> BoxedSqlQuery<'static, Pg, SqlQuery> {
    let (offset, limit) = page_bounds(page);
    diesel::sql_query(format!(
        "{prefix}SELECT id, email, created_at, hard_bounced_at, complaint_at, \
         unsubscribed_at, message_count, pending_since, confirmed_at \
         FROM (SELECT * FROM contacts WHERE {filter} OFFSET 0) c \
         ORDER BY {order} OFFSET $4 LIMIT $5",
        filter = trigram_filter(lookup, query.status),
        order = order_sql(query.sort, query.ascending),
    ))
    .into_boxed()
    .bind::<diesel::sql_types::Uuid, _>(account.as_uuid())
    .bind::<Text, _>(lookup_pattern(lookup))
    .bind::<Text, _>(needle.to_owned())
    .bind::<BigInt, _>(offset)
    .bind::<BigInt, _>(limit)
}

/// The plans PostgreSQL makes for the two statements that look up the email filter's
/// needle in the trigram index, the capped count and the read of [`ContactSearchPlan::
/// Trigram`], for the tests that check which indexes serve them
/// (`crates/postgres/tests/contact_list_indexes.rs`); `None` when the needle has no
/// lookup (the list then keeps the planner's choice).
///
/// # Errors
/// [`StoreError`] when a statement fails.
pub fn explain_contact_search(
    conn: &mut PgConnection,
    account: AccountId,
    query: &ContactQuery,
    page: PageRequest,
) -> Result<Option<[String; 2]>, StoreError> {
    let Some(search) = query.search.as_ref().filter(|_| query.email.is_none()) else {
        return Ok(None);
    };
    let needle = search.to_lowercase();
    let Some(lookup) = lookup(&needle) else {
        return Ok(None);
    };
    let lines = |statement: BoxedSqlQuery<'static, Pg, SqlQuery>,
                 conn: &mut PgConnection|
     -> Result<String, StoreError> {
        Ok(statement
            .load::<PlanLine>(conn)
            .map_err(store_error)?
            .into_iter()
            .map(|line| line.line)
            .collect::<Vec<_>>()
            .join("\n"))
    };
    Ok(Some([
        lines(
            count_statement("EXPLAIN ", account, lookup, &needle, query.status),
            conn,
        )?,
        lines(
            trigram_read_statement("EXPLAIN ", account, lookup, &needle, query, page),
            conn,
        )?,
    ]))
}

/// From this share of all contacts' addresses on (of every account, as `ANALYZE` sampled
/// them), a [`Lookup::Pair`] or [`Lookup::Char`] is not looked up: the trigram and
/// character indexes hold every account's addresses, so the lookup reads as many entries
/// as the whole table has matches, before the count's cap can stop it: for a pair in a
/// tenth of the addresses that was slower than the planner's own choice (docs/console.md,
/// "Short needles", has the figures).
/// 2.5 % is three of the hundred-odd sampled addresses a histogram holds: a pair that
/// 0.1 % of the addresses contain is sampled that often about once in 6,000 `ANALYZE`s,
/// and then only gets the planner's choice, as before this lookup existed.
const COMMON_PAIR_SHARE: f64 = 0.025;

#[derive(QueryableByName)]
struct ShareRow {
    #[diesel(sql_type = diesel::sql_types::Double)]
    share: f64,
}

/// The share of `contacts.email_lower` values containing `needle` by the column's
/// statistics (its most common values with their frequencies, and its histogram for the
/// rest); 0 when the table was never analysed.
fn share_in_statistics(conn: &mut PgConnection, needle: &str) -> Result<f64, StoreError> {
    let row: Option<ShareRow> = diesel::sql_query(
        "SELECT (coalesce((SELECT sum(f) FROM unnest(most_common_vals::text::text[], \
                 most_common_freqs) m(v, f) WHERE strpos(v, $1) > 0), 0) \
               + (1 - coalesce((SELECT sum(f) FROM unnest(most_common_freqs) f), 0)) \
                 * coalesce((SELECT avg((strpos(b, $1) > 0)::int) \
                             FROM unnest(histogram_bounds::text::text[]) b), 0))::float8 AS share \
         FROM pg_stats WHERE schemaname = current_schema() AND tablename = 'contacts' \
         AND attname = 'email_lower'",
    )
    .bind::<Text, _>(needle)
    .get_result(conn)
    .optional()
    .map_err(store_error)?;
    Ok(row.map_or(0.0, |row| row.share))
}

/// Chooses how to run the list's email-substring filter: from a count of the matches
/// through the trigram index, capped at [`FEW_MATCHES`], never from the planner's
/// estimate, which follows the column's histogram: a rare needle that a sampled address
/// happens to contain is estimated at 1 % of the contacts, and the planner then walked
/// the whole sort index (docs/console.md, "The email filter's plan", has the figures).
///
/// The count's matches are a `MATERIALIZED` CTE: PostgreSQL plans a CTE for all its rows
/// (the trigram index for a rare needle, a sequential scan for a needle most contacts
/// contain) and runs it only as far as the `LIMIT` outside reads, so a common needle stops
/// after [`FEW_MATCHES`] rows. A plain `LIMIT` subquery would be planned for its first
/// rows, where the walk looks cheap again.
///
/// # Errors
/// [`StoreError`] when the statement fails.
pub fn contact_search_plan(
    conn: &mut PgConnection,
    account: AccountId,
    query: &ContactQuery,
) -> Result<ContactSearchPlan, StoreError> {
    let Some(search) = query.search.as_ref().filter(|_| query.email.is_none()) else {
        return Ok(ContactSearchPlan::Walk);
    };
    let needle = search.to_lowercase();
    let Some(lookup) = lookup(&needle) else {
        // Nothing to look up: counting would read every contact (docs/console.md, "Short
        // needles").
        return Ok(ContactSearchPlan::Walk);
    };
    if let Lookup::Pair(short) | Lookup::Char(short) = lookup {
        if share_in_statistics(conn, short)? >= COMMON_PAIR_SHARE {
            // Too common to look up: keep the planner's choice (docs/console.md, "Short
            // needles").
            return Ok(ContactSearchPlan::Walk);
        }
    }
    let row: CountRow = count_statement("", account, lookup, &needle, query.status)
        .get_result(conn)
        .map_err(store_error)?;
    Ok(if row.n < FEW_MATCHES {
        ContactSearchPlan::Trigram
    } else {
        ContactSearchPlan::Walk
    })
}

/// One page of the contact list run with `plan` (any plan gives the same page).
fn list_rows_with(
    conn: &mut PgConnection,
    account: AccountId,
    query: &ContactQuery,
    page: PageRequest,
    plan: ContactSearchPlan,
) -> Result<Vec<ContactRow>, StoreError> {
    let (offset, limit) = page_bounds(page);
    let search = query.search.as_ref().filter(|_| query.email.is_none());
    if let (ContactSearchPlan::Trigram, Some(search)) = (plan, search) {
        let needle = search.to_lowercase();
        // A needle the index cannot serve is looked up whole with LIKE, which reads the
        // whole index but gives the same rows (the tests force this plan on any needle).
        let lookup = lookup(&needle).unwrap_or(Lookup::Like(&needle));
        return trigram_read_statement("", account, lookup, &needle, query, page)
            .load(conn)
            .map_err(store_error);
    }
    // A needle without a trigram keeps the planner's choice, as before: it scans the table
    // in parallel for a rare one, twice as fast as walking. A pair (two letters or digits)
    // gets here when the count or the statistics found it common; its `LIKE` gives the
    // trigram index nothing to look up, so the planner can only walk or scan, and it
    // walked `r2` as fast as the pinned walk (docs/console.md, "Short needles"). One
    // character gets here the same way: its `LIKE` is not the character index's
    // expression. With a trigram the count chose the walk: pin it.
    let counted = search.is_some_and(|search| has_trigram(&search.to_lowercase()));
    let needle = if counted {
        NeedleFilter::Strpos
    } else {
        NeedleFilter::Like
    };
    let select = filtered_as(account, query, needle);
    let asc = query.ascending;
    let select = match (query.sort, asc) {
        (ContactSort::CreateDate, true) => {
            select.order((contacts::created_at.asc(), contacts::id.asc()))
        }
        (ContactSort::CreateDate, false) => {
            select.order((contacts::created_at.desc(), contacts::id.desc()))
        }
        (ContactSort::Email, true) => {
            select.order((contacts::email_lower.asc(), contacts::id.asc()))
        }
        (ContactSort::Email, false) => {
            select.order((contacts::email_lower.desc(), contacts::id.desc()))
        }
        (ContactSort::MessageCount, true) => {
            select.order((contacts::message_count.asc(), contacts::id.asc()))
        }
        (ContactSort::MessageCount, false) => {
            select.order((contacts::message_count.desc(), contacts::id.desc()))
        }
        // Contacts without a name come last in both directions.
        (ContactSort::Name, true) => {
            select.order((contacts::sort_name.asc().nulls_last(), contacts::id.asc()))
        }
        (ContactSort::Name, false) => {
            select.order((contacts::sort_name.desc().nulls_last(), contacts::id.desc()))
        }
        (ContactSort::Status, true) => {
            select.order((sql::<Integer>(STATUS_RANK).asc(), contacts::id.asc()))
        }
        (ContactSort::Status, false) => {
            select.order((sql::<Integer>(STATUS_RANK).desc(), contacts::id.desc()))
        }
    };
    select
        .offset(offset)
        .limit(limit)
        .select(ContactRow::as_select())
        .load(conn)
        .map_err(store_error)
}

/// The ids of one page of the contact list run with `plan`, for the tests that compare
/// the plans (`crates/postgres/tests/contact_list_indexes.rs`).
///
/// # Errors
/// [`StoreError`] when the statement fails.
pub fn list_contact_ids_with(
    conn: &mut PgConnection,
    account: AccountId,
    query: &ContactQuery,
    page: PageRequest,
    plan: ContactSearchPlan,
) -> Result<Vec<ContactId>, StoreError> {
    Ok(list_rows_with(conn, account, query, page, plan)?
        .into_iter()
        .map(|row| ContactId::from_uuid(row.id))
        .collect())
}

/// Status rank: active < unsubscribed < complained < bounced. Migration 15's
/// `contacts_status_rank_idx` indexes this very expression (PostgreSQL matches an
/// expression index only on the same text): change both together.
const STATUS_RANK: &str = "CASE WHEN hard_bounced_at IS NOT NULL THEN 3 \
     WHEN complaint_at IS NOT NULL THEN 2 WHEN unsubscribed_at IS NOT NULL THEN 1 ELSE 0 END";

/// The `WITH` parts that find the contact with an email or insert it, shared by
/// `upsert_contact_id` and `record_event` (a macro so both statements stay `&'static str`
/// literals for `prepared_sql`). Parameters: `$1` account, `$2` the new contact's id, `$3`
/// the email, `$4` the time, `$5` the normalised email. `contact` holds one row (`id`,
/// `created`), or none when a concurrent insert of the same email committed after the
/// statement's snapshot (ON CONFLICT DO NOTHING waited for it, and the read cannot see
/// it): a new statement finds it. `when: "<condition>"` makes both parts conditional
/// (`contact` is then empty and nothing is inserted when the condition is false).
macro_rules! contact_by_email {
    () => {
        contact_by_email!(when: "TRUE")
    };
    (when: $condition:literal) => {
        concat!(
            "inserted AS (\
               INSERT INTO contacts (account_id, id, email, created_at) \
               SELECT $1, $2, $3, $4 WHERE ",
            $condition,
            " ON CONFLICT (account_id, email_lower) DO NOTHING RETURNING id\
             ), \
             contact AS (\
               SELECT id, TRUE AS created FROM inserted \
               UNION ALL \
               SELECT id, FALSE AS created FROM contacts \
               WHERE account_id = $1 AND email_lower = $5 AND ",
            $condition,
            " AND NOT EXISTS (SELECT 1 FROM inserted) \
               LIMIT 1\
             )"
        )
    };
}

/// A meta the insert of `ensure_attribute_metas` wrote, with the slot it took.
#[derive(QueryableByName)]
struct SlottedMeta {
    #[diesel(sql_type = Text)]
    slug: String,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::SmallInt>)]
    slot: Option<i16>,
}

/// An announcement's message deleted with its contact, in the state it left.
#[derive(QueryableByName)]
struct GoneMessage {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    announcement_id: Uuid,
    #[diesel(sql_type = Text)]
    state: String,
}

/// What `upsert_contact_id`'s statement returns.
#[derive(QueryableByName)]
struct UpsertedRow {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
    #[diesel(sql_type = Bool)]
    created: bool,
}

impl PgUnitOfWork<'_> {
    /// The stored types of `slugs` (those that have a meta).
    fn types_of_slugs(
        &mut self,
        account: AccountId,
        slugs: &[&str],
    ) -> Result<HashMap<String, AttributeType>, StoreError> {
        attribute_metas::table
            .filter(attribute_metas::account_id.eq(account.as_uuid()))
            .filter(attribute_metas::slug.eq_any(slugs))
            .select((attribute_metas::slug, attribute_metas::attribute_type))
            .load::<(String, String)>(self.conn)
            .map_err(store_error)?
            .into_iter()
            .map(|(slug, kind)| {
                let kind = AttributeType::parse(&kind)
                    .ok_or_else(|| corrupt("attribute_metas.attribute_type", &kind))?;
                Ok((slug, kind))
            })
            .collect()
    }

    fn topic_unsubscriptions_of(
        &mut self,
        account: AccountId,
        ids: &[Uuid],
    ) -> Result<HashMap<Uuid, Vec<TopicId>>, StoreError> {
        let rows: Vec<(Uuid, Uuid)> = topic_unsubscriptions::table
            .filter(topic_unsubscriptions::account_id.eq(account.as_uuid()))
            .filter(topic_unsubscriptions::contact_id.eq_any(ids))
            .order((
                topic_unsubscriptions::contact_id,
                topic_unsubscriptions::created_at,
            ))
            .select((
                topic_unsubscriptions::contact_id,
                topic_unsubscriptions::topic_id,
            ))
            .load(self.conn)
            .map_err(store_error)?;
        let mut map: HashMap<Uuid, Vec<TopicId>> = HashMap::new();
        for (contact, topic) in rows {
            map.entry(contact)
                .or_default()
                .push(TopicId::from_uuid(topic));
        }
        Ok(map)
    }

    fn with_topics(
        &mut self,
        account: AccountId,
        rows: Vec<ContactRow>,
    ) -> Result<Vec<Contact>, StoreError> {
        let ids: Vec<Uuid> = rows.iter().map(|row| row.id).collect();
        let mut topics = self.topic_unsubscriptions_of(account, &ids)?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let unsubscribed = topics.remove(&row.id).unwrap_or_default();
                row.into_contact(unsubscribed)
            })
            .collect())
    }
}

impl ContactRepository for PgUnitOfWork<'_> {
    fn attribute_types(
        &mut self,
        account: AccountId,
    ) -> Result<HashMap<String, AttributeType>, StoreError> {
        attribute_metas::table
            .filter(attribute_metas::account_id.eq(account.as_uuid()))
            .select((attribute_metas::slug, attribute_metas::attribute_type))
            .load::<(String, String)>(self.conn)
            .map_err(store_error)?
            .into_iter()
            .map(|(slug, kind)| {
                let kind = AttributeType::parse(&kind)
                    .ok_or_else(|| corrupt("attribute_metas.attribute_type", &kind))?;
                Ok((slug, kind))
            })
            .collect()
    }

    fn ensure_attribute_metas(
        &mut self,
        account: AccountId,
        metas: &[(String, AttributeType, AttributeSource)],
        now: Timestamp,
    ) -> Result<HashMap<String, AttributeType>, StoreError> {
        // Read first: in steady state every meta exists, and the read is then the only
        // statement (one round trip instead of an insert that does nothing and a read).
        let slugs: Vec<&str> = metas.iter().map(|(slug, _, _)| slug.as_str()).collect();
        let found = self.types_of_slugs(account, &slugs)?;
        if metas.iter().all(|(slug, _, _)| found.contains_key(slug)) {
            return Ok(found);
        }
        // The missing metas, each slug once (the first one given, as before).
        let mut seen = HashSet::new();
        let mut missing: Vec<&(String, AttributeType, AttributeSource)> = metas
            .iter()
            .filter(|(slug, _, _)| !found.contains_key(slug) && seen.insert(slug.as_str()))
            .collect();
        // A new custom meta takes the lowest free slot of its type (migration 31). The
        // advisory lock orders the metas created at once for one account: the insert
        // below, a statement of its own after the lock, sees every slot taken before.
        if missing
            .iter()
            .any(|(_, _, source)| *source == AttributeSource::Custom)
        {
            prepared_sql(
                "SELECT pg_advisory_xact_lock(hashtextextended('attribute slots ' || $1::text, 0))",
            )
            .bind::<diesel::sql_types::Uuid, _>(account.as_uuid())
            .execute(self.conn)
            .map_err(store_error)?;
            // Counted after the lock, so the metas of a concurrent first write are in the
            // count: the new custom ones past the bound are left out, in the order given.
            let mut room =
                MAX_CUSTOM_ATTRIBUTES.saturating_sub(self.count_custom_attribute_metas(account)?);
            missing.retain(|(_, _, source)| {
                if *source != AttributeSource::Custom {
                    return true;
                }
                let admitted = room > 0;
                room = room.saturating_sub(1);
                admitted
            });
            if missing.is_empty() {
                return self.types_of_slugs(account, &slugs);
            }
        }
        // The k-th new custom meta of a type (in the order given) takes the k-th free slot
        // of the type, none when there are fewer. A slug a concurrent statement inserts
        // first is left to it (ON CONFLICT), and so is its slot.
        let slotted: Vec<SlottedMeta> = prepared_sql(
            "INSERT INTO attribute_metas \
                 (account_id, slug, attribute_type, source, created_at, slot) \
             SELECT $1, n.slug, n.attribute_type, n.source, $5, \
                    CASE WHEN n.source = 'custom' THEN (ARRAY( \
                        SELECT free.slot::smallint FROM generate_series(1, 4) AS free(slot) \
                        WHERE NOT EXISTS (SELECT 1 FROM attribute_metas m \
                                          WHERE m.account_id = $1 \
                                            AND m.attribute_type = n.attribute_type \
                                            AND m.slot = free.slot) \
                        ORDER BY free.slot))[n.rank] END \
             FROM (SELECT t.slug, t.attribute_type, t.source, t.position, \
                          row_number() OVER (PARTITION BY t.attribute_type, t.source \
                                             ORDER BY t.position) AS rank \
                   FROM unnest($2::text[], $3::text[], $4::text[]) \
                        WITH ORDINALITY AS t(slug, attribute_type, source, position) \
                   WHERE NOT EXISTS (SELECT 1 FROM attribute_metas e \
                                     WHERE e.account_id = $1 AND e.slug = t.slug)) AS n \
             ORDER BY n.position \
             ON CONFLICT (account_id, slug) DO NOTHING \
             RETURNING slug, slot",
        )
        .bind::<diesel::sql_types::Uuid, _>(account.as_uuid())
        .bind::<diesel::sql_types::Array<Text>, _>(
            missing
                .iter()
                .map(|(slug, _, _)| slug.as_str())
                .collect::<Vec<_>>(),
        )
        .bind::<diesel::sql_types::Array<Text>, _>(
            missing
                .iter()
                .map(|(_, kind, _)| kind.as_str())
                .collect::<Vec<_>>(),
        )
        .bind::<diesel::sql_types::Array<Text>, _>(
            missing
                .iter()
                .map(|(_, _, source)| source.as_str())
                .collect::<Vec<_>>(),
        )
        .bind::<diesel::sql_types::Timestamptz, _>(now.as_datetime())
        .load(self.conn)
        .map_err(store_error)?;
        // Values written before their meta (by hand) are copied into the slots it took.
        for meta in slotted.iter().filter(|meta| meta.slot.is_some()) {
            if let Some((_, kind, _)) = missing.iter().find(|(slug, _, _)| *slug == meta.slug) {
                fill_new_slot(self.conn, account.as_uuid(), &meta.slug, *kind)?;
            }
        }
        self.types_of_slugs(account, &slugs)
    }

    fn list_attribute_metas(
        &mut self,
        account: AccountId,
        offset: u64,
        limit: u32,
    ) -> Result<Vec<AttributeMeta>, StoreError> {
        // The primary key (account_id, slug) serves the order; an offset past the end
        // reads nothing.
        attribute_metas::table
            .filter(attribute_metas::account_id.eq(account.as_uuid()))
            .order(attribute_metas::slug.asc())
            .offset(i64::try_from(offset).unwrap_or(i64::MAX))
            .limit(i64::from(limit))
            .select((
                attribute_metas::slug,
                attribute_metas::attribute_type,
                attribute_metas::source,
            ))
            .load::<(String, String, String)>(self.conn)
            .map_err(store_error)?
            .into_iter()
            .map(|(slug, kind, source)| {
                Ok(AttributeMeta {
                    attribute_type: AttributeType::parse(&kind)
                        .ok_or_else(|| corrupt("attribute_metas.attribute_type", &kind))?,
                    source: AttributeSource::parse(&source)
                        .ok_or_else(|| corrupt("attribute_metas.source", &source))?,
                    slug,
                })
            })
            .collect()
    }

    fn count_custom_attribute_metas(&mut self, account: AccountId) -> Result<u64, StoreError> {
        attribute_metas::table
            .filter(attribute_metas::account_id.eq(account.as_uuid()))
            .filter(attribute_metas::source.eq(AttributeSource::Custom.as_str()))
            .count()
            .get_result::<i64>(self.conn)
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(store_error)
    }

    fn count_attribute_metas(&mut self, account: AccountId) -> Result<u64, StoreError> {
        attribute_metas::table
            .filter(attribute_metas::account_id.eq(account.as_uuid()))
            .count()
            .get_result::<i64>(self.conn)
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(store_error)
    }

    fn upsert_contact(
        &mut self,
        account: AccountId,
        new_id: ContactId,
        email: &EmailAddress,
        now: Timestamp,
    ) -> Result<(Contact, bool), StoreError> {
        let (id, created) = self.upsert_contact_id(account, new_id, email, now)?;
        let contact = self.find_contact(account, id)?.ok_or_else(|| {
            corrupt(
                "contacts",
                "an upserted contact vanished in its transaction",
            )
        })?;
        Ok((contact, created))
    }

    fn upsert_contact_id(
        &mut self,
        account: AccountId,
        new_id: ContactId,
        email: &EmailAddress,
        now: Timestamp,
    ) -> Result<(ContactId, bool), StoreError> {
        // One statement in the usual cases: the insert, and when it found the email taken,
        // the existing contact read in the same statement.
        let found: Option<UpsertedRow> = prepared_sql(concat!(
            "WITH ",
            contact_by_email!(),
            " SELECT id, created FROM contact"
        ))
        .bind::<diesel::sql_types::Uuid, _>(account.as_uuid())
        .bind::<diesel::sql_types::Uuid, _>(new_id.as_uuid())
        .bind::<Text, _>(email.as_str())
        .bind::<diesel::sql_types::Timestamptz, _>(now.as_datetime())
        .bind::<Text, _>(email.normalized())
        .get_result(self.conn)
        .optional()
        .map_err(store_error)?;
        if let Some(row) = found {
            return Ok((ContactId::from_uuid(row.id), row.created));
        }
        // Neither: a concurrent insert of the same email committed after this statement's
        // snapshot (ON CONFLICT DO NOTHING waited for it). A new statement sees it.
        let id: Uuid = contacts::table
            .filter(contacts::account_id.eq(account.as_uuid()))
            .filter(contacts::email_lower.eq(email.normalized()))
            .select(contacts::id)
            .first(self.conn)
            .map_err(store_error)?;
        Ok((ContactId::from_uuid(id), false))
    }

    fn set_attributes(
        &mut self,
        account: AccountId,
        contact: ContactId,
        values: &[(String, AttributeValue)],
    ) -> Result<(), StoreError> {
        let rows: Vec<AttributeRow> = values
            .iter()
            .map(|(slug, value)| attribute_row(account, contact, slug, value))
            .collect();
        diesel::insert_into(contact_attributes::table)
            .values(&rows)
            .on_conflict((
                contact_attributes::account_id,
                contact_attributes::contact_id,
                contact_attributes::slug,
            ))
            .do_update()
            .set((
                contact_attributes::string_value.eq(excluded(contact_attributes::string_value)),
                contact_attributes::number_value.eq(excluded(contact_attributes::number_value)),
                contact_attributes::bool_value.eq(excluded(contact_attributes::bool_value)),
                contact_attributes::date_value.eq(excluded(contact_attributes::date_value)),
            ))
            .execute(self.conn)
            .map_err(store_error)?;
        copy_into_slots(
            self.conn,
            account.as_uuid(),
            &WrittenValues {
                contacts: &rows.iter().map(|row| row.contact_id).collect::<Vec<_>>(),
                slugs: &rows.iter().map(|row| row.slug.clone()).collect::<Vec<_>>(),
                strings: &rows
                    .iter()
                    .map(|row| row.string_value.clone())
                    .collect::<Vec<_>>(),
                numbers: &rows.iter().map(|row| row.number_value).collect::<Vec<_>>(),
                booleans: &rows.iter().map(|row| row.bool_value).collect::<Vec<_>>(),
                dates: &rows.iter().map(|row| row.date_value).collect::<Vec<_>>(),
            },
        )?;
        if let Some((_, value)) = values.iter().find(|(slug, _)| slug == "name") {
            let sort_name = match value {
                AttributeValue::String(text) => Some(text.to_lowercase()),
                _ => None,
            };
            diesel::update(contacts::table.find((account.as_uuid(), contact.as_uuid())))
                .set(contacts::sort_name.eq(sort_name))
                .execute(self.conn)
                .map_err(store_error)?;
        }
        Ok(())
    }

    fn record_event(
        &mut self,
        account: AccountId,
        event: &EventOfEmail<'_>,
    ) -> Result<RecordedEvent, StoreError> {
        self.record_event_retried(account, event, false)?
            .ok_or_else(|| {
                StoreError::Other(
                    "an event was left unwritten though no listener was asked about".into(),
                )
            })
    }

    fn record_event_unless_listened(
        &mut self,
        account: AccountId,
        event: &EventOfEmail<'_>,
    ) -> Result<Option<ContactId>, StoreError> {
        // On Citus the event is several routed statements (`record_event_in_steps`),
        // which need the transaction the use case then opens.
        if self.on_citus {
            return Ok(None);
        }
        Ok(self
            .record_event_retried(account, event, true)?
            .map(|recorded| recorded.contact_id))
    }

    fn find_contact(
        &mut self,
        account: AccountId,
        id: ContactId,
    ) -> Result<Option<Contact>, StoreError> {
        Ok(self.find_contacts(account, &[id])?.pop())
    }

    fn find_contact_by_email(
        &mut self,
        account: AccountId,
        email: &EmailAddress,
    ) -> Result<Option<Contact>, StoreError> {
        let rows = contacts::table
            .filter(contacts::account_id.eq(account.as_uuid()))
            // PostgreSQL's `lower()`, as the generated `email_lower` (and so the unique
            // key the upsert meets) is made with.
            .filter(
                sql::<Bool>("email_lower = lower(")
                    .bind::<Text, _>(email.as_str())
                    .sql(")"),
            )
            .select(ContactRow::as_select())
            .limit(1)
            .load(self.conn)
            .map_err(store_error)?;
        Ok(self.with_topics(account, rows)?.pop())
    }

    fn find_contacts(
        &mut self,
        account: AccountId,
        ids: &[ContactId],
    ) -> Result<Vec<Contact>, StoreError> {
        let uuids: Vec<Uuid> = ids.iter().map(ContactId::as_uuid).collect();
        let rows = contacts::table
            .filter(contacts::account_id.eq(account.as_uuid()))
            .filter(contacts::id.eq_any(&uuids))
            .select(ContactRow::as_select())
            .load(self.conn)
            .map_err(store_error)?;
        let mut by_id: HashMap<Uuid, Contact> = self
            .with_topics(account, rows)?
            .into_iter()
            .map(|contact| (contact.id.as_uuid(), contact))
            .collect();
        Ok(uuids.iter().filter_map(|id| by_id.remove(id)).collect())
    }

    fn list_contacts(
        &mut self,
        account: AccountId,
        query: &ContactQuery,
        page: PageRequest,
    ) -> Result<Vec<Contact>, StoreError> {
        // A needle many contacts contain: the first contacts hold the page. Otherwise
        // count the matches to choose (docs/console.md, "The email filter's plan").
        let rows = match walk_first(self.conn, account, query, page)? {
            Some(rows) => rows,
            None => {
                let plan = contact_search_plan(self.conn, account, query)?;
                list_rows_with(self.conn, account, query, page, plan)?
            }
        };
        self.with_topics(account, rows)
    }

    fn count_contacts(
        &mut self,
        account: AccountId,
        query: &ContactQuery,
    ) -> Result<u64, StoreError> {
        filtered(account, query)
            .count()
            .get_result::<i64>(self.conn)
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(store_error)
    }

    fn stored_attributes(
        &mut self,
        account: AccountId,
        ids: &[ContactId],
    ) -> Result<HashMap<ContactId, ResolvedAttributes>, StoreError> {
        let uuids: Vec<Uuid> = ids.iter().map(ContactId::as_uuid).collect();
        let mut resolved: HashMap<ContactId, ResolvedAttributes> = HashMap::new();
        let rows: Vec<AttributeRow> = contact_attributes::table
            .filter(contact_attributes::account_id.eq(account.as_uuid()))
            .filter(contact_attributes::contact_id.eq_any(&uuids))
            .select(AttributeRow::as_select())
            .load(self.conn)
            .map_err(store_error)?;
        for row in rows {
            let value = row.value()?;
            resolved
                .entry(ContactId::from_uuid(row.contact_id))
                .or_default()
                .insert(row.slug, value);
        }
        Ok(resolved)
    }

    fn clear_hard_bounce(&mut self, account: AccountId, id: ContactId) -> Result<bool, StoreError> {
        diesel::update(contacts::table.find((account.as_uuid(), id.as_uuid())))
            .set(contacts::hard_bounced_at.eq(None::<OffsetDateTime>))
            .execute(self.conn)
            .map(|n| n > 0)
            .map_err(store_error)
    }

    fn delete_contact(&mut self, account: AccountId, id: ContactId) -> Result<bool, StoreError> {
        // The contact's events leave the names' counts with it (they go by cascade). The
        // counts are read in a WITH part: Citus routes an INSERT of a SELECT from a
        // distributed table to every shard, one of values it read first to the account's.
        prepared_sql(
            "WITH gone AS ( \
                 SELECT slug, count(*) AS n FROM contact_events \
                 WHERE account_id = $1 AND contact_id = $2 GROUP BY slug) \
             INSERT INTO contact_event_increments (account_id, slug, count, last_seen) \
             SELECT $1, slug, -n, NULL FROM gone",
        )
        .bind::<diesel::sql_types::Uuid, _>(account.as_uuid())
        .bind::<diesel::sql_types::Uuid, _>(id.as_uuid())
        .execute(self.conn)
        .map_err(store_error)?;
        // The contact's messages go with it by cascade; those of announcements go first,
        // so the counters learn the states they leave (the rest go by cascade).
        let gone: Vec<GoneMessage> = prepared_sql(
            "DELETE FROM messages WHERE account_id = $1 AND contact_id = $2 \
             AND announcement_id IS NOT NULL \
             RETURNING announcement_id, message_state(status, lease_token) AS state",
        )
        .bind::<diesel::sql_types::Uuid, _>(account.as_uuid())
        .bind::<diesel::sql_types::Uuid, _>(id.as_uuid())
        .load(self.conn)
        .map_err(store_error)?;
        let mut counters = AccountCounters::default();
        for message in gone {
            let state = MessageStatus::parse(&message.state)
                .ok_or_else(|| corrupt("the deleted message's state", &message.state))?;
            counters.moved(message.announcement_id, Some(state), None);
        }
        of_existing_announcements(self.conn, account.as_uuid(), &mut counters)?;
        add_to_counters(self.conn, account.as_uuid(), &counters)?;
        // A form's confirmations hold what the person posted: they go with the contact.
        prepared_sql("DELETE FROM form_confirmations WHERE account_id = $1 AND contact_id = $2")
            .bind::<diesel::sql_types::Uuid, _>(account.as_uuid())
            .bind::<diesel::sql_types::Uuid, _>(id.as_uuid())
            .execute(self.conn)
            .map_err(store_error)?;
        diesel::delete(contacts::table.find((account.as_uuid(), id.as_uuid())))
            .execute(self.conn)
            .map(|n| n > 0)
            .map_err(store_error)
    }

    fn erase_personal_traces(
        &mut self,
        account: AccountId,
        contact: ContactId,
        normalized_email: &str,
    ) -> Result<u64, StoreError> {
        // Each statement names the account, so on Citus each runs on its shard alone; the
        // messages are found by contact or by address (`messages_recipient_idx`).
        let statements = [
            "UPDATE message_tracking t SET links = '{}' FROM messages m \
             WHERE t.account_id = $1 AND m.account_id = $1 AND t.message_id = m.id \
               AND (m.contact_id = $2 OR lower(m.email) = $3)",
            "UPDATE webhook_events SET payload = payload - 'email' - 'smtpReply' \
             WHERE account_id = $1 \
               AND (payload->>'contactId' = $2::text OR lower(payload->>'email') = $3)",
            "UPDATE messages SET email = '', data = '{}'::jsonb, last_reply = NULL, \
               idempotency_key = NULL, request_hash = NULL \
             WHERE account_id = $1 AND (contact_id = $2 OR lower(email) = $3)",
        ];
        let mut blanked = 0;
        for sql in statements {
            blanked = prepared_sql(sql)
                .bind::<diesel::sql_types::Uuid, _>(account.as_uuid())
                .bind::<diesel::sql_types::Uuid, _>(contact.as_uuid())
                .bind::<Text, _>(normalized_email)
                .execute(self.conn)
                .map_err(store_error)?;
        }
        // The last statement's count: the messages.
        Ok(blanked as u64)
    }

    fn event_names(&mut self, account: AccountId) -> Result<Vec<EventName>, StoreError> {
        // The folded totals plus the increments not folded yet: a few rows per name,
        // whatever the number of events (docs/design.md, "Audience at scale").
        prepared_sql(
            "SELECT slug, sum(count)::bigint AS count, max(last_seen) AS last_seen FROM ( \
                 SELECT slug, count, last_seen FROM contact_event_totals WHERE account_id = $1 \
                 UNION ALL \
                 SELECT slug, count, last_seen FROM contact_event_increments WHERE account_id = $1 \
             ) AS names GROUP BY slug HAVING sum(count) > 0 ORDER BY slug",
        )
        .bind::<diesel::sql_types::Uuid, _>(account.as_uuid())
        .load::<EventNameRow>(self.conn)
        .map_err(store_error)?
        .into_iter()
        .map(|row| (row.slug, row.count, row.last_seen))
        .map(|(slug, count, last)| {
            Ok(EventName {
                slug,
                count: u64::try_from(count).unwrap_or(0),
                last_seen: last
                    .map(timestamp)
                    .ok_or_else(|| corrupt("contact_events", "max of a non-empty group"))?,
            })
        })
        .collect()
    }

    fn list_contact_events(
        &mut self,
        account: AccountId,
        contact: ContactId,
        page: PageRequest,
    ) -> Result<Vec<ContactEvent>, StoreError> {
        // The (account_id, contact_id, occurred_at) index serves it, read backwards.
        let (offset, limit) = page_bounds(page);
        contact_events::table
            .filter(contact_events::account_id.eq(account.as_uuid()))
            .filter(contact_events::contact_id.eq(contact.as_uuid()))
            .order((
                contact_events::occurred_at.desc(),
                contact_events::id.desc(),
            ))
            .offset(offset)
            .limit(limit)
            .select((
                contact_events::id,
                contact_events::slug,
                contact_events::occurred_at,
            ))
            .load::<(Uuid, String, OffsetDateTime)>(self.conn)
            .map_err(store_error)?
            .into_iter()
            .map(|(id, slug, occurred_at)| {
                Ok(ContactEvent {
                    id: ContactEventId::from_uuid(id),
                    contact_id: contact,
                    slug: EventSlug::from_stored(slug),
                    occurred_at: timestamp(occurred_at),
                })
            })
            .collect()
    }

    fn fold_event_name_increments(&mut self, limit: u32) -> Result<u64, StoreError> {
        // The accounts with increments waiting (on Citus a read of every shard, once a
        // fold: the one statement here that is not one account's), then one statement
        // per account, which Citus runs on that account's shard.
        let accounts: Vec<AccountRow> = crate::citus::fan_out(self.conn, |conn| {
            prepared_sql("SELECT DISTINCT account_id FROM contact_event_increments LIMIT $1")
                .bind::<BigInt, _>(FOLD_ACCOUNTS)
                .load(conn)
                .map_err(store_error)
        })?;
        let mut folded = 0;
        for account in accounts {
            let room = u64::from(limit).saturating_sub(folded);
            if room == 0 {
                break;
            }
            folded += fold_account_increments(self.conn, account.account_id, room)?;
        }
        Ok(folded)
    }
}

/// Accounts a fold visits at most; the rest wait for the next fold.
const FOLD_ACCOUNTS: i64 = 16;

#[derive(QueryableByName)]
struct AccountRow {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    account_id: Uuid,
}

/// Folds up to `limit` of one account's event-name increments into its totals. One
/// statement: the batch leaves the increments and lands in the totals together. SKIP
/// LOCKED lets two workers fold at once without waiting on each other.
fn fold_account_increments(
    conn: &mut PgConnection,
    account: Uuid,
    limit: u64,
) -> Result<u64, StoreError> {
    prepared_sql(
        "WITH batch AS ( \
             SELECT account_id, id FROM contact_event_increments \
             WHERE account_id = $2 LIMIT $1 \
             FOR UPDATE SKIP LOCKED \
         ), folded AS ( \
             DELETE FROM contact_event_increments i USING batch \
             WHERE i.account_id = $2 AND i.account_id = batch.account_id AND i.id = batch.id \
             RETURNING i.account_id, i.slug, i.count, i.last_seen \
         ), totals AS ( \
             INSERT INTO contact_event_totals (account_id, slug, count, last_seen) \
             SELECT account_id, slug, sum(count), max(last_seen) FROM folded \
             GROUP BY account_id, slug \
             ON CONFLICT (account_id, slug) DO UPDATE SET \
                 count = contact_event_totals.count + excluded.count, \
                 last_seen = GREATEST(contact_event_totals.last_seen, excluded.last_seen) \
         ) SELECT count(*) AS count FROM folded",
    )
    .bind::<BigInt, _>(i64::try_from(limit).unwrap_or(i64::MAX))
    .bind::<diesel::sql_types::Uuid, _>(account)
    .get_result::<FoldedRow>(conn)
    .map(|row| u64::try_from(row.count).unwrap_or(0))
    .map_err(store_error)
}

#[derive(QueryableByName)]
struct EventNameRow {
    #[diesel(sql_type = Text)]
    slug: String,
    #[diesel(sql_type = BigInt)]
    count: i64,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Timestamptz>)]
    last_seen: Option<OffsetDateTime>,
}

#[derive(QueryableByName)]
struct FoldedRow {
    #[diesel(sql_type = BigInt)]
    count: i64,
}

/// A suppression time of a contact that is set once and then kept.
#[derive(Clone, Copy)]
pub(super) enum ContactMark {
    HardBounced,
    Complained,
    Unsubscribed,
}

impl ContactMark {
    fn column(self) -> &'static str {
        match self {
            Self::HardBounced => "hard_bounced_at",
            Self::Complained => "complaint_at",
            Self::Unsubscribed => "unsubscribed_at",
        }
    }
}

/// A latest-activity time of a contact that a later message moves forward (what
/// engagement conditions on any message read).
#[derive(Clone, Copy)]
pub(super) enum LatestActivity {
    Opened,
    Clicked,
    Bounced,
}

impl LatestActivity {
    fn column(self) -> &'static str {
        match self {
            Self::Opened => "last_opened_at",
            Self::Clicked => "last_clicked_at",
            Self::Bounced => "last_bounced_at",
        }
    }
}

/// Moves the contact's `activity` time to `at` unless it is later already.
pub(super) fn record_latest_activity(
    conn: &mut PgConnection,
    account: AccountId,
    contact: Uuid,
    activity: LatestActivity,
    at: Timestamp,
) -> Result<(), StoreError> {
    let column = activity.column();
    prepared_sql(format!(
        "UPDATE contacts SET {column} = greatest({column}, $3) WHERE account_id = $1 AND id = $2"
    ))
    .bind::<diesel::sql_types::Uuid, _>(account.as_uuid())
    .bind::<diesel::sql_types::Uuid, _>(contact)
    .bind::<diesel::sql_types::Timestamptz, _>(at.as_datetime())
    .execute(conn)
    .map(|_| ())
    .map_err(store_error)
}

/// Sets `mark` on the contact to `now` unless it is set already, and returns whether this
/// call set it. The `IS NULL` guard is re-checked after a concurrent writer's commit (READ
/// COMMITTED), so two identical reports or clicks set it, and count it, once.
pub(super) fn set_contact_mark(
    conn: &mut PgConnection,
    account: AccountId,
    contact: ContactId,
    mark: ContactMark,
    now: Timestamp,
) -> Result<bool, StoreError> {
    let column = mark.column();
    prepared_sql(format!(
        "UPDATE contacts SET {column} = $3 WHERE account_id = $1 AND id = $2 AND {column} IS NULL"
    ))
    .bind::<diesel::sql_types::Uuid, _>(account.as_uuid())
    .bind::<diesel::sql_types::Uuid, _>(contact.as_uuid())
    .bind::<diesel::sql_types::Timestamptz, _>(now.as_datetime())
    .execute(conn)
    .map(|n| n > 0)
    .map_err(store_error)
}

impl PgUnitOfWork<'_> {
    /// `record_event_once` until it finds or makes the contact (at most three times).
    /// `None`: nothing is written, because `unless_listened` and an automation listens.
    fn record_event_retried(
        &mut self,
        account: AccountId,
        event: &EventOfEmail<'_>,
        unless_listened: bool,
    ) -> Result<Option<RecordedEvent>, StoreError> {
        // No contact and nothing written: a concurrent insert of the same email committed
        // after the statement's snapshot (ON CONFLICT DO NOTHING waited for it). The
        // statement again, with a new snapshot, finds it; a third miss means the contact
        // is being created and deleted under it, which a client retry settles.
        for _ in 0..3 {
            let row = if self.on_citus {
                self.record_event_in_steps(account, event)?
            } else {
                self.record_event_once(account, event, unless_listened)?
            };
            match row.id {
                Some(id) => {
                    return Ok(Some(RecordedEvent {
                        contact_id: ContactId::from_uuid(id),
                        triggers: row.triggers,
                    }))
                }
                None if unless_listened && row.triggers => return Ok(None),
                None => {}
            }
        }
        Err(StoreError::Unavailable(
            "the event's contact was created and deleted concurrently three times".into(),
        ))
    }

    /// The statement of `record_event_once` as routed statements, one after another in
    /// the caller's transaction, for Citus. There the one statement's WITH parts run as
    /// steps whose results are copied to every node, so it costs a round trip to each
    /// node and fails for every tenant while any node is away; each statement here names
    /// the account and goes to its shard alone.
    fn record_event_in_steps(
        &mut self,
        account: AccountId,
        event: &EventOfEmail<'_>,
    ) -> Result<RecordedEventRow, StoreError> {
        #[derive(QueryableByName)]
        struct Found {
            #[diesel(sql_type = Bool)]
            yes: bool,
        }
        #[derive(QueryableByName)]
        struct Id {
            #[diesel(sql_type = diesel::sql_types::Uuid)]
            id: Uuid,
        }
        let account_id = account.as_uuid();
        let triggers = prepared_sql(
            "SELECT EXISTS (SELECT 1 FROM automations \
                            WHERE account_id = $1 AND trigger_event_slug = $2 AND is_enabled) \
                    AS yes",
        )
        .bind::<diesel::sql_types::Uuid, _>(account_id)
        .bind::<Text, _>(event.slug.as_str())
        .get_result::<Found>(self.conn)
        .map_err(store_error)?
        .yes;
        let inserted = prepared_sql(
            "INSERT INTO contacts (account_id, id, email, created_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (account_id, email_lower) DO NOTHING RETURNING id",
        )
        .bind::<diesel::sql_types::Uuid, _>(account_id)
        .bind::<diesel::sql_types::Uuid, _>(event.new_contact.as_uuid())
        .bind::<Text, _>(event.email.as_str())
        .bind::<diesel::sql_types::Timestamptz, _>(event.occurred_at.as_datetime())
        .get_result::<Id>(self.conn)
        .optional()
        .map_err(store_error)?;
        let contact = match inserted {
            Some(row) => Some(row.id),
            None => {
                prepared_sql("SELECT id FROM contacts WHERE account_id = $1 AND email_lower = $2")
                    .bind::<diesel::sql_types::Uuid, _>(account_id)
                    .bind::<Text, _>(event.email.normalized())
                    .get_result::<Id>(self.conn)
                    .optional()
                    .map_err(store_error)?
                    .map(|row| row.id)
            }
        };
        let Some(contact) = contact else {
            // Created and deleted by others between the two statements: asked again.
            return Ok(RecordedEventRow { id: None, triggers });
        };
        // The same writes as the one statement's WITH parts, in the same order; each
        // statement sends only the values its placeholders name.
        let writes = [
            "INSERT INTO attribute_metas (account_id, slug, attribute_type, source, created_at) \
             VALUES ($1, 'event.' || $3, $5, $6, $4) ON CONFLICT (account_id, slug) DO NOTHING",
            "INSERT INTO contact_events (account_id, id, contact_id, slug, occurred_at) \
             VALUES ($1, $7, $2, $3, $4)",
            "INSERT INTO contact_event_increments (account_id, slug, count, last_seen) \
             VALUES ($1, $3, 1, $4)",
            "INSERT INTO contact_attributes (account_id, contact_id, slug, date_value) \
             VALUES ($1, $2, 'event.' || $3, $4) \
             ON CONFLICT (account_id, contact_id, slug) \
             DO UPDATE SET date_value = GREATEST(contact_attributes.date_value, excluded.date_value)",
        ];
        for sql in writes {
            prepared_sql(sql)
                .bind::<diesel::sql_types::Uuid, _>(account_id)
                .bind::<diesel::sql_types::Uuid, _>(contact)
                .bind::<Text, _>(event.slug.as_str())
                .bind::<diesel::sql_types::Timestamptz, _>(event.occurred_at.as_datetime())
                .bind::<Text, _>(AttributeType::Date.as_str())
                .bind::<Text, _>(AttributeSource::Event.as_str())
                .bind::<diesel::sql_types::Uuid, _>(event.id.as_uuid())
                .execute(self.conn)
                .map_err(store_error)?;
        }
        Ok(RecordedEventRow {
            id: Some(contact),
            triggers,
        })
    }

    fn record_event_once(
        &mut self,
        account: AccountId,
        event: &EventOfEmail<'_>,
        unless_listened: bool,
    ) -> Result<RecordedEventRow, StoreError> {
        // One statement, one round trip: whether an enabled automation listens (the
        // partial index automations_trigger_idx; most events have none, and the use case
        // reads the automations only when one does); the contact found by email or
        // inserted (as in `upsert_contact_id`); the `event.<slug>` meta when it is missing
        // (an existing meta costs one index probe; ON CONFLICT covers a concurrent first
        // event of the slug; an event meta takes no slot, so no advisory lock); the event
        // row; its name's count (insert-only, so no row every event of the name would wait
        // on); and `event.<slug>` moved forward, which touches no typed slot (`event.*`
        // slugs are no custom attribute's, and only custom metas take slots), so no
        // `contact_slots` upkeep follows and the statement stays alone. With `$10` (unless listened)
        // and a listening automation, `contact` is empty and nothing is written: that
        // event must be written in a transaction with the messages it queues.
        // Data-modifying WITH parts always run to completion; `contact` is read by each,
        // so it is computed once. Every write takes its row from `contact`. The one row
        // answered has a NULL id when nothing was written.
        prepared_sql(concat!(
            "WITH listening AS (\
               SELECT EXISTS (SELECT 1 FROM automations \
                              WHERE account_id = $1 AND trigger_event_slug = $7 AND is_enabled) \
                      AS yes\
             ), ",
            contact_by_email!(when: "NOT ($10 AND (SELECT yes FROM listening))"),
            ", \
             meta AS (\
               INSERT INTO attribute_metas (account_id, slug, attribute_type, source, created_at) \
               SELECT $1, 'event.' || $7, $8, $9, $4 FROM contact \
               WHERE NOT EXISTS (SELECT 1 FROM attribute_metas \
                                 WHERE account_id = $1 AND slug = 'event.' || $7) \
               ON CONFLICT (account_id, slug) DO NOTHING\
             ), \
             event AS (\
               INSERT INTO contact_events (account_id, id, contact_id, slug, occurred_at) \
               SELECT $1, $6, id, $7, $4 FROM contact\
             ), \
             increment AS (\
               INSERT INTO contact_event_increments (account_id, slug, count, last_seen) \
               SELECT $1, $7, 1, $4 FROM contact\
             ), \
             latest AS (\
               INSERT INTO contact_attributes (account_id, contact_id, slug, date_value) \
               SELECT $1, id, 'event.' || $7, $4 FROM contact \
               ON CONFLICT (account_id, contact_id, slug) \
               DO UPDATE SET date_value = GREATEST(contact_attributes.date_value, excluded.date_value)\
             ) \
             SELECT contact.id, listening.yes AS triggers \
             FROM listening LEFT JOIN contact ON TRUE",
        ))
        .bind::<diesel::sql_types::Uuid, _>(account.as_uuid())
        .bind::<diesel::sql_types::Uuid, _>(event.new_contact.as_uuid())
        .bind::<Text, _>(event.email.as_str())
        .bind::<diesel::sql_types::Timestamptz, _>(event.occurred_at.as_datetime())
        .bind::<Text, _>(event.email.normalized())
        .bind::<diesel::sql_types::Uuid, _>(event.id.as_uuid())
        .bind::<Text, _>(event.slug.as_str())
        .bind::<Text, _>(AttributeType::Date.as_str())
        .bind::<Text, _>(AttributeSource::Event.as_str())
        .bind::<Bool, _>(unless_listened)
        .get_result(self.conn)
        .map_err(store_error)
    }
}

#[cfg(test)]
mod tests {
    use super::{
        contains_pattern, has_trigram, indexed_part, lookup, lookup_pattern, order_sql, Lookup,
        STATUS_RANK,
    };
    use mailroom_domain::contact::ContactSort;

    #[test]
    fn contains_pattern_escapes_the_like_metacharacters() {
        assert_eq!(contains_pattern("c4242"), "%c4242%");
        assert_eq!(contains_pattern(""), "%%");
        assert_eq!(contains_pattern(r"a%b_c\d"), r"%a\%b\_c\\d%");
    }

    #[test]
    fn a_trigram_is_three_ascii_letters_or_digits_in_a_row() {
        for needle in ["c42", "c4242", "x@bench", "a.b.c42"] {
            assert!(has_trigram(needle), "{needle}");
        }
        for needle in ["", "zq", "a.b.c", "c4@b", "é日本", "a_b%c"] {
            assert!(!has_trigram(needle), "{needle}");
        }
    }

    #[test]
    fn the_index_looks_up_an_addresss_local_part_when_it_has_a_trigram() {
        assert_eq!(indexed_part("c108983@bench.example"), "c108983@");
        assert_eq!(indexed_part("c1@bench.example"), "c1@bench.example");
        assert_eq!(indexed_part("@bench.example"), "@bench.example");
        assert_eq!(indexed_part("bench.example"), "bench.example");
    }

    #[test]
    fn two_ascii_letters_or_digits_are_looked_up_as_a_pair() {
        assert_eq!(lookup("zq"), Some(Lookup::Pair("zq")));
        assert_eq!(lookup("q9"), Some(Lookup::Pair("q9")));
        assert_eq!(lookup_pattern(Lookup::Pair("q9")), "q9[ -~]");
        // Two with punctuation, LIKE's metacharacters, non-ASCII: nothing to look up.
        for needle in ["", "q@", ".c", "_x", "z%", "zü", "i\u{307}"] {
            assert_eq!(lookup(needle), None, "{needle}");
        }
        // One character, any: looked up in the character index, as it is.
        for needle in ["z", "7", "ü", "日", "%", "_", "\\", "@", "."] {
            assert_eq!(lookup(needle), Some(Lookup::Char(needle)), "{needle}");
            assert_eq!(lookup_pattern(Lookup::Char(needle)), needle);
        }
        assert_eq!(lookup("c42"), Some(Lookup::Like("c42")));
        assert_eq!(
            lookup("c108983@bench.example"),
            Some(Lookup::Like("c108983@"))
        );
    }

    #[test]
    fn the_raw_order_breaks_ties_by_id_in_the_same_direction() {
        assert_eq!(order_sql(ContactSort::Email, true), "email_lower, id");
        assert_eq!(
            order_sql(ContactSort::Name, false),
            "sort_name DESC NULLS LAST, id DESC"
        );
        assert_eq!(
            order_sql(ContactSort::Status, false),
            format!("{STATUS_RANK} DESC, id DESC")
        );
    }
}
