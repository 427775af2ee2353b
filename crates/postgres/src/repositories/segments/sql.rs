//! Compiles a [`Segment`] into the `WHERE` clause of one query over `contacts`.
//!
//! The text is built from fixed fragments and `$n` placeholders only; every value (account,
//! slug, operand, day bound, topic, paging) travels as a bound parameter in [`Sql::params`].
//! Each condition becomes one predicate on the current `contacts` row:
//!
//! - a system attribute reads its `contacts` column (`email` → `email_lower`, `create_date`
//!   → `created_at`, `message_count` → `message_count`); it always exists;
//! - any other attribute (custom, or `event.<slug>`) is an `EXISTS` over its row in
//!   `contact_attributes a`, whose typed column must be set (so a row of another type does
//!   not match, and the planner can use the partial index of that column), or a
//!   `NOT EXISTS` for `not_exists`.
//!
//! The semantics are those of `Condition::matches` in the domain crate: strings compare
//! after `lower()` on both sides (the `lower(string_value)` index serves equality), dates by
//! UTC day as half-open ranges from `day_bounds`, and a missing attribute matches only
//! `not_exists`. A property test (`tests/segments.rs`) holds the two together.
//!
//! An engagement condition on any message reads the contact's own `last_*_at` column (kept
//! by delivery, tracking and bounce reports, so a count needs no join with the messages);
//! one on an announcement's or a template's messages is an `EXISTS` over the contact's
//! messages (and their `message_tracking` row for opens and clicks).

use diesel::{
    pg::Pg,
    query_builder::{BoxedSqlQuery, SqlQuery},
    sql_query, sql_types,
};
use mailroom_domain::{
    attribute::AttributeType,
    condition::{
        day_bounds,
        engagement::{Activity, Engagement, EngagementScope},
        Condition, DateOperator, NumberOperator, Segment, StringOperator,
    },
    message::MessageStatus,
    AccountId, Timestamp,
};
use time::{Date, OffsetDateTime};
use uuid::Uuid;

use crate::repositories::contains_pattern;

/// One bound value, typed for PostgreSQL.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Param {
    Text(String),
    Double(f64),
    Bool(bool),
    Timestamptz(OffsetDateTime),
    Uuid(Uuid),
    BigInt(i64),
    UuidArray(Vec<Uuid>),
}

/// SQL text with `$1…$n` placeholders and the values they stand for, in order.
#[derive(Debug, Default)]
pub(super) struct Sql {
    pub(super) text: String,
    pub(super) params: Vec<Param>,
    /// The account's placeholder once a filter bound it: subqueries name it rather than
    /// `contacts.account_id`, since Citus routes a correlated subquery behind a fence
    /// (`OFFSET 0`) to the account's shard only when it names the account itself.
    account: Option<String>,
}

impl Sql {
    /// Records `param` and returns its placeholder, to be written into the text.
    pub(super) fn bind(&mut self, param: Param) -> String {
        self.params.push(param);
        format!("${}", self.params.len())
    }

    /// Appends fixed SQL text (fragments and placeholders, never values).
    pub(super) fn push(&mut self, text: &str) {
        self.text.push_str(text);
    }

    /// The diesel query, with every parameter bound in placeholder order.
    pub(super) fn into_query(self) -> BoxedSqlQuery<'static, Pg, SqlQuery> {
        self.params.into_iter().fold(
            sql_query(self.text).into_boxed(),
            |query, param| match param {
                Param::Text(value) => query.bind::<sql_types::Text, _>(value),
                Param::Double(value) => query.bind::<sql_types::Double, _>(value),
                Param::Bool(value) => query.bind::<sql_types::Bool, _>(value),
                Param::Timestamptz(value) => query.bind::<sql_types::Timestamptz, _>(value),
                Param::Uuid(value) => query.bind::<sql_types::Uuid, _>(value),
                Param::BigInt(value) => query.bind::<sql_types::BigInt, _>(value),
                Param::UuidArray(value) => {
                    query.bind::<sql_types::Array<sql_types::Uuid>, _>(value)
                }
            },
        )
    }
}

/// How a subquery on another table is run per contact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Subqueries {
    /// As the planner likes: it may turn `EXISTS` into a join, hashing the other set.
    Planned,
    /// Probed per contact through an index: each `EXISTS` ends in `OFFSET 0`, which keeps
    /// PostgreSQL from turning it into a join (or a hashed subplan), so a page that needs
    /// the first 25 matches never reads a whole other set. This replaces the `SET LOCAL
    /// enable_hashjoin = off …` statements that cost two round trips per page.
    Probed,
}

impl Subqueries {
    /// The text that ends each subquery.
    fn fence(self) -> &'static str {
        match self {
            Self::Planned => "",
            Self::Probed => " OFFSET 0",
        }
    }
}

/// Appends the `WHERE` condition selecting the segment's contacts of `account`.
pub(super) fn push_segment_filter(sql: &mut Sql, account: AccountId, segment: &Segment) {
    push_filter(sql, account, segment, Subqueries::Planned);
}

/// [`push_segment_filter`] with its subqueries probed per contact ([`Subqueries::Probed`]),
/// for a page or an announcement's expansion batch walked in contact order.
pub(super) fn push_probed_segment_filter(sql: &mut Sql, account: AccountId, segment: &Segment) {
    push_filter(sql, account, segment, Subqueries::Probed);
}

fn push_filter(sql: &mut Sql, account: AccountId, segment: &Segment, subqueries: Subqueries) {
    let fence = subqueries.fence();
    let account = sql.bind(Param::Uuid(account.as_uuid()));
    sql.push(&format!("contacts.account_id = {account}"));
    sql.account = Some(account.clone());
    if !segment.include_unsubscribed {
        sql.push(" AND contacts.unsubscribed_at IS NULL");
    }
    if let Some(topic) = segment.topic {
        let topic = sql.bind(Param::Uuid(topic.as_uuid()));
        sql.push(&format!(
            " AND NOT EXISTS (SELECT 1 FROM topic_unsubscriptions u \
             WHERE u.account_id = {account} AND u.contact_id = contacts.id \
             AND u.topic_id = {topic}{fence})"
        ));
    }
    for condition in &segment.conditions {
        let predicate = condition_predicate(sql, condition, subqueries);
        sql.push(" AND ");
        sql.push(&predicate);
    }
}

/// The `contacts` column of a system attribute and its type. `email_lower` is the
/// generated `lower(email)`, so string comparisons need not lower it again.
fn system_column(slug: &str) -> Option<(AttributeType, &'static str)> {
    match slug {
        "email" => Some((AttributeType::String, "contacts.email_lower")),
        "create_date" => Some((AttributeType::Date, "contacts.created_at")),
        "message_count" => Some((AttributeType::Number, "contacts.message_count")),
        _ => None,
    }
}

/// Whether `slug` names a system attribute, a column of `contacts`.
pub(super) fn is_system_attribute(slug: &str) -> bool {
    system_column(slug).is_some()
}

/// The type a condition's operator applies to; `None` for `exists`/`not_exists`.
fn family(condition: &Condition) -> Option<AttributeType> {
    match condition {
        Condition::Exists { .. } | Condition::NotExists { .. } | Condition::Engagement(_) => None,
        Condition::Boolean { .. } => Some(AttributeType::Boolean),
        Condition::Number { .. } => Some(AttributeType::Number),
        Condition::Date { .. } => Some(AttributeType::Date),
        Condition::String { .. } => Some(AttributeType::String),
    }
}

/// One condition as a predicate on the current `contacts` row.
fn condition_predicate(sql: &mut Sql, condition: &Condition, subqueries: Subqueries) -> String {
    if let Condition::Engagement(engagement) = condition {
        return engagement_predicate(sql, engagement, subqueries);
    }
    if let Some((column_type, column)) = system_column(condition.slug()) {
        return match condition {
            Condition::Exists { .. } => "TRUE".to_owned(),
            Condition::NotExists { .. } => "FALSE".to_owned(),
            // Parsing prevents a family mismatch; like the domain, it matches nothing.
            _ if family(condition) != Some(column_type) => "FALSE".to_owned(),
            // LIKE rather than strpos so that the trigram index on `email_lower`
            // (migration 26) can serve it; the operand is escaped to match literally.
            Condition::String {
                operator: operator @ (StringOperator::Contains | StringOperator::NotContains),
                value,
                ..
            } => {
                let pattern = sql.bind(Param::Text(contains_pattern(value)));
                let like = if *operator == StringOperator::Contains {
                    "LIKE"
                } else {
                    "NOT LIKE"
                };
                format!("{column} {like} lower({pattern})")
            }
            _ => typed_predicate(sql, condition, column),
        };
    }
    let slug = sql.bind(Param::Text(condition.slug().to_owned()));
    let account = sql
        .account
        .clone()
        .unwrap_or_else(|| "contacts.account_id".to_owned());
    let row = format!(
        "SELECT 1 FROM contact_attributes a WHERE a.account_id = {account} \
         AND a.contact_id = contacts.id AND a.slug = {slug}"
    );
    let fence = subqueries.fence();
    if matches!(condition, Condition::NotExists { .. }) {
        return format!("NOT EXISTS ({row}{fence})");
    }
    let filter = row_filter(sql, condition);
    format!("EXISTS ({row}{filter}{fence})")
}

/// The `contacts` column holding the latest time of `activity` over the contact's messages.
fn latest_activity_column(activity: Activity) -> &'static str {
    match activity {
        Activity::Sent => "contacts.last_sent_at",
        Activity::Opened => "contacts.last_opened_at",
        Activity::Clicked => "contacts.last_clicked_at",
        Activity::Bounced => "contacts.last_bounced_at",
    }
}

/// An engagement condition as a predicate on the current `contacts` row: a comparison of
/// the contact's latest activity for any message, an `EXISTS` over the contact's messages
/// of one announcement or template otherwise. Test sends are not the contact's messages.
fn engagement_predicate(sql: &mut Sql, engagement: &Engagement, subqueries: Subqueries) -> String {
    let since = sql.bind(Param::Timestamptz(engagement.since.as_datetime()));
    let (scope_column, scope_id) = match engagement.scope {
        EngagementScope::AnyMessage => {
            let column = latest_activity_column(engagement.activity);
            return if engagement.happened {
                format!("{column} >= {since}")
            } else {
                format!("({column} IS NULL OR {column} < {since})")
            };
        }
        EngagementScope::Announcement(id) => ("m.announcement_id", id.as_uuid()),
        EngagementScope::Template(id) => ("m.template_id", id.as_uuid()),
    };
    let scope_id = sql.bind(Param::Uuid(scope_id));
    let account = sql
        .account
        .clone()
        .unwrap_or_else(|| "contacts.account_id".to_owned());
    let tracking = "JOIN message_tracking t ON t.account_id = m.account_id AND t.message_id = m.id";
    let (join, at) = match engagement.activity {
        Activity::Sent => ("", format!("m.sent_at >= {since}")),
        Activity::Opened => (tracking, format!("t.opened_at >= {since}")),
        Activity::Clicked => (tracking, format!("t.clicked_at >= {since}")),
        Activity::Bounced => (
            "",
            format!(
                "m.status = '{}' AND m.updated_at >= {since}",
                MessageStatus::Bounced.as_str()
            ),
        ),
    };
    let fence = subqueries.fence();
    let exists = format!(
        "EXISTS (SELECT 1 FROM messages m {join} WHERE m.account_id = {account} \
         AND m.contact_id = contacts.id AND {scope_column} = {scope_id} AND NOT m.test \
         AND {at}{fence})"
    );
    if engagement.happened {
        exists
    } else {
        format!("NOT {exists}")
    }
}

/// The rest of the `WHERE` clause over a `contact_attributes a` row of the condition's slug
/// (empty for `exists`): its typed column must be set, so a row of another type does not
/// match and the partial index of that column serves it, and must satisfy the comparison.
fn row_filter(sql: &mut Sql, condition: &Condition) -> String {
    let (guard, column) = match family(condition) {
        None => return String::new(),
        Some(AttributeType::String) => ("a.string_value IS NOT NULL", "lower(a.string_value)"),
        Some(AttributeType::Number) => ("a.number_value IS NOT NULL", "a.number_value"),
        Some(AttributeType::Boolean) => ("a.bool_value IS NOT NULL", "a.bool_value"),
        Some(AttributeType::Date) => ("a.date_value IS NOT NULL", "a.date_value"),
    };
    let predicate = typed_predicate(sql, condition, column);
    format!(" AND {guard} AND {predicate}")
}

/// Whether the condition is answered by the rows of its slug in `contact_attributes`
/// alone: a custom or event attribute with any operator but `not_exists`. Such a
/// condition is a set of contact ids, read from one range of one index.
pub(super) fn is_row_condition(condition: &Condition) -> bool {
    system_column(condition.slug()).is_none()
        && !matches!(
            condition,
            Condition::NotExists { .. } | Condition::Engagement(_)
        )
}

/// Whether the condition compares for equality (a narrow index range, usually the smaller
/// set when sizes tie).
pub(super) fn is_equality(condition: &Condition) -> bool {
    match condition {
        Condition::Boolean { .. } => true,
        Condition::Number { operator, .. } => *operator == NumberOperator::Equal,
        Condition::Date { operator, .. } => *operator == DateOperator::Equal,
        Condition::String { operator, .. } => *operator == StringOperator::Equal,
        Condition::Exists { .. } | Condition::NotExists { .. } | Condition::Engagement(_) => false,
    }
}

/// Whether the condition's index range yields contact ids in order (one value, then
/// `contact_id` in the index), so a page in id order can stop early: boolean, number
/// `equal` and string `equal`. A date `equal` is a day's range, not one value.
pub(super) fn is_id_ordered(condition: &Condition) -> bool {
    match condition {
        Condition::Boolean { .. } => true,
        Condition::Number { operator, .. } => *operator == NumberOperator::Equal,
        Condition::String { operator, .. } => *operator == StringOperator::Equal,
        Condition::Date { .. }
        | Condition::Exists { .. }
        | Condition::NotExists { .. }
        | Condition::Engagement(_) => false,
    }
}

/// `SELECT a.contact_id …`: the contacts of account placeholder `account` satisfying the
/// row condition `condition` ([`is_row_condition`]), from an index-only scan of the
/// partial index of its type. Each contact appears at most once: `(account_id,
/// contact_id, slug)` is the primary key.
fn contact_set(sql: &mut Sql, account: &str, condition: &Condition) -> String {
    let slug = sql.bind(Param::Text(condition.slug().to_owned()));
    let filter = row_filter(sql, condition);
    format!(
        "SELECT a.contact_id FROM contact_attributes a \
         WHERE a.account_id = {account} AND a.slug = {slug}{filter}"
    )
}

/// The segment's filters that are not attribute conditions (unsubscribed, topic), as
/// predicates on the contact id `id` of account placeholder `account`. Both are
/// anti-joins on small sets: `contacts_unsubscribed_idx` and `topic_unsubscriptions`.
fn push_contact_filters(
    sql: &mut Sql,
    account: &str,
    segment: &Segment,
    id: &str,
    subqueries: Subqueries,
) {
    let fence = subqueries.fence();
    if !segment.include_unsubscribed {
        sql.push(&format!(
            " AND NOT EXISTS (SELECT 1 FROM contacts u WHERE u.account_id = {account} \
             AND u.id = {id} AND u.unsubscribed_at IS NOT NULL{fence})"
        ));
    }
    if let Some(topic) = segment.topic {
        let topic = sql.bind(Param::Uuid(topic.as_uuid()));
        sql.push(&format!(
            " AND NOT EXISTS (SELECT 1 FROM topic_unsubscriptions t \
             WHERE t.account_id = {account} AND t.contact_id = {id} AND t.topic_id = {topic}\
             {fence})"
        ));
    }
}

/// One statement answering, for each condition in order, how many contacts its set holds,
/// counted up to `cap` (so each costs at most `cap` index entries): the statistics that
/// pick the plan. Only for segments whose conditions are all row conditions.
pub(super) fn set_sizes(account: AccountId, segment: &Segment, cap: i64) -> Sql {
    let mut sql = Sql::default();
    let account = sql.bind(Param::Uuid(account.as_uuid()));
    let cap = sql.bind(Param::BigInt(cap));
    let sizes: Vec<String> = segment
        .conditions
        .iter()
        .map(|condition| {
            let set = contact_set(&mut sql, &account, condition);
            format!("(SELECT count(*) FROM ({set} LIMIT {cap}) s)")
        })
        .collect();
    sql.push(&format!(
        "SELECT ARRAY[{}]::bigint[] AS sizes",
        sizes.join(", ")
    ));
    sql
}

/// The `FROM … WHERE …` of the contacts matching a segment of row conditions, driven by
/// the condition `driver`: its (small) set is read once and every other condition is
/// probed per contact through the primary key of `contact_attributes`
/// ([`Subqueries::Probed`]). The contact id is `d.contact_id`.
pub(super) fn push_driven(sql: &mut Sql, account: AccountId, segment: &Segment, driver: usize) {
    let account = sql.bind(Param::Uuid(account.as_uuid()));
    let set = contact_set(sql, &account, &segment.conditions[driver]);
    sql.push(&format!("FROM ({set}) d WHERE TRUE"));
    for (index, condition) in segment.conditions.iter().enumerate() {
        if index == driver {
            continue;
        }
        let slug = sql.bind(Param::Text(condition.slug().to_owned()));
        let filter = row_filter(sql, condition);
        sql.push(&format!(
            " AND EXISTS (SELECT 1 FROM contact_attributes a WHERE a.account_id = {account} \
             AND a.contact_id = d.contact_id AND a.slug = {slug}{filter} OFFSET 0)"
        ));
    }
    push_contact_filters(sql, &account, segment, "d.contact_id", Subqueries::Probed);
}

/// The `FROM … WHERE …` of the contacts matching a segment of row conditions, as the
/// intersection of every condition's set, joined in `order` (smallest first, so each hash
/// table is built from the smaller side). The contact id is `s0.contact_id`.
pub(super) fn push_intersection(
    sql: &mut Sql,
    account: AccountId,
    segment: &Segment,
    order: &[usize],
) {
    let account = sql.bind(Param::Uuid(account.as_uuid()));
    sql.push("FROM ");
    for (position, index) in order.iter().enumerate() {
        let set = contact_set(sql, &account, &segment.conditions[*index]);
        if position == 0 {
            sql.push(&format!("({set}) s0"));
        } else {
            sql.push(&format!(
                " JOIN ({set}) s{position} ON s{position}.contact_id = s0.contact_id"
            ));
        }
    }
    sql.push(" WHERE TRUE");
    push_contact_filters(sql, &account, segment, "s0.contact_id", Subqueries::Planned);
}

/// A slug's typed slot: the column of `contact_slots` that holds its values (migration 31,
/// docs/operations.md "What lists and counts read"). The type is the slug's stored type, not the
/// condition's family; the number is 1 to 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotColumn {
    /// The slug's stored type.
    pub attribute_type: AttributeType,
    /// Which of the four columns of that type.
    pub slot: u8,
}

impl SlotColumn {
    /// The column, qualified by the alias `s` of `contact_slots`. Built from the type's
    /// fixed name and a number checked to be 1 to 4, never from tenant input.
    fn column(self) -> String {
        format!("s.{}_{}", self.attribute_type.as_str(), self.slot)
    }
}

/// One condition as a predicate on the current `contact_slots s` row, with `slot` the
/// column of the condition's slug. The column is `NULL` exactly when the contact has no
/// value, so `exists` is `IS NOT NULL` and every comparison with a missing value is not
/// true, as in the domain; an operator of another family than the slug's type matches
/// nothing, as in `row_filter`. `not_exists` never comes here (`slot_plan` leaves it out:
/// a contact without slotted values has no row to test); it would match nothing.
fn slot_predicate(sql: &mut Sql, condition: &Condition, slot: SlotColumn) -> String {
    let column = slot.column();
    match condition {
        Condition::Exists { .. } => format!("{column} IS NOT NULL"),
        Condition::NotExists { .. } => "FALSE".to_owned(),
        _ if family(condition) != Some(slot.attribute_type) => "FALSE".to_owned(),
        _ => {
            // The `IS NOT NULL` matches the partial index's predicate. A string slot holds
            // the value lowered already (migration 31), as `typed_predicate` expects.
            let predicate = typed_predicate(sql, condition, &column);
            format!("({column} IS NOT NULL AND {predicate})")
        }
    }
}

/// The `FROM … WHERE …` of the contacts matching a segment whose every condition's slug
/// has a slot (`slots[i]` for `segment.conditions[i]`) and asks for a value: the account's
/// rows of `contact_slots` walked in contact order with the predicates checked on each
/// (a page stops at its end, as on a flat table), or the most selective slot index read
/// and sorted, as the planner chooses from its per-column statistics. The unsubscribed
/// and topic filters are probed per row ([`Subqueries::Probed`]). The contact id is
/// `s.contact_id`.
pub(super) fn push_slots(
    sql: &mut Sql,
    account: AccountId,
    segment: &Segment,
    slots: &[SlotColumn],
) {
    let account = sql.bind(Param::Uuid(account.as_uuid()));
    sql.push(&format!(
        "FROM contact_slots s WHERE s.account_id = {account}"
    ));
    for (condition, slot) in segment.conditions.iter().zip(slots) {
        let predicate = slot_predicate(sql, condition, *slot);
        sql.push(" AND ");
        sql.push(&predicate);
    }
    push_contact_filters(sql, &account, segment, "s.contact_id", Subqueries::Probed);
}

/// The whole count statement of a [`SegmentPlan::Slots`](super::SegmentPlan) count: the
/// slot rows that match, less those of contacts the segment leaves out (unsubscribed, or
/// unsubscribed from its topic). Subtracting the small left-out set, read from its own
/// indexes and probed into `contact_slots` by primary key, keeps the matching rows a bare
/// count, which one condition's index can answer alone (an index-only scan): an anti-join
/// needs each row's contact id, and PostgreSQL then read the whole slot table instead
/// (docs/performance.md, "Design choices, measured").
pub(super) fn push_slots_count(
    sql: &mut Sql,
    account: AccountId,
    segment: &Segment,
    slots: &[SlotColumn],
) {
    let account = sql.bind(Param::Uuid(account.as_uuid()));
    let predicates = |sql: &mut Sql| {
        segment
            .conditions
            .iter()
            .zip(slots)
            .map(|(condition, slot)| slot_predicate(sql, condition, *slot))
            .collect::<Vec<_>>()
            .join(" AND ")
    };
    let matching = predicates(sql);
    sql.push(&format!(
        "SELECT (SELECT count(*) FROM contact_slots s WHERE s.account_id = {account} \
         AND {matching})"
    ));
    let mut left_out = Vec::new();
    if !segment.include_unsubscribed {
        left_out.push(format!(
            "SELECT id FROM contacts WHERE account_id = {account} AND unsubscribed_at IS NOT NULL"
        ));
    }
    if let Some(topic) = segment.topic {
        let topic = sql.bind(Param::Uuid(topic.as_uuid()));
        left_out.push(format!(
            "SELECT contact_id AS id FROM topic_unsubscriptions \
             WHERE account_id = {account} AND topic_id = {topic}"
        ));
    }
    if !left_out.is_empty() {
        // UNION: a contact both unsubscribed and out of the topic is subtracted once.
        let matching = predicates(sql);
        sql.push(&format!(
            " - (SELECT count(*) FROM ({}) x JOIN contact_slots s \
             ON s.account_id = {account} AND s.contact_id = x.id WHERE {matching})",
            left_out.join(" UNION ")
        ));
    }
    sql.push(" AS count");
}

/// The comparison of a boolean, number, date or string condition on `column`, which holds
/// a value of the condition's family (for strings: already lowered).
fn typed_predicate(sql: &mut Sql, condition: &Condition, column: &str) -> String {
    match condition {
        Condition::Exists { .. } => "TRUE".to_owned(),
        // An engagement condition reads messages, never an attribute column
        // (`engagement_predicate`); on a column it matches nothing, as in the domain.
        Condition::NotExists { .. } | Condition::Engagement(_) => "FALSE".to_owned(),
        Condition::Boolean { expected, .. } => {
            let expected = sql.bind(Param::Bool(*expected));
            format!("{column} = {expected}")
        }
        Condition::Number {
            operator, value, ..
        } => {
            let value = sql.bind(Param::Double(*value));
            let operator = match operator {
                NumberOperator::Equal => "=",
                NumberOperator::NotEqual => "<>",
                NumberOperator::GreaterThan => ">",
                NumberOperator::GreaterThanEqual => ">=",
                NumberOperator::LessThan => "<",
                NumberOperator::LessThanEqual => "<=",
            };
            format!("{column} {operator} {value}")
        }
        Condition::Date { operator, day, .. } => date_predicate(sql, column, *operator, *day),
        Condition::String {
            operator, value, ..
        } => {
            // lower() on the operand in SQL, not in Rust, so both sides are lowered by the
            // same function and `column = lower($n)` matches the expression index.
            let value = sql.bind(Param::Text(value.clone()));
            match operator {
                StringOperator::Equal => format!("{column} = lower({value})"),
                StringOperator::NotEqual => format!("{column} <> lower({value})"),
                StringOperator::Contains => format!("strpos({column}, lower({value})) > 0"),
                StringOperator::NotContains => format!("strpos({column}, lower({value})) = 0"),
            }
        }
    }
}

/// A UTC-day comparison as a range on the timestamp `column`: the day `D` is
/// `[start(D), start(D + 1))`, so the comparison works on instants and an index serves it.
fn date_predicate(sql: &mut Sql, column: &str, operator: DateOperator, day: Date) -> String {
    let (start, end) = day_bounds(day);
    let mut bound = |at: Timestamp| sql.bind(Param::Timestamptz(at.as_datetime()));
    match operator {
        DateOperator::After => format!("{column} >= {}", bound(end)),
        DateOperator::Before => format!("{column} < {}", bound(start)),
        DateOperator::Equal => {
            let (start, end) = (bound(start), bound(end));
            format!("({column} >= {start} AND {column} < {end})")
        }
        DateOperator::NotEqual => {
            let (start, end) = (bound(start), bound(end));
            format!("({column} < {start} OR {column} >= {end})")
        }
    }
}

#[cfg(test)]
mod tests {
    use mailroom_domain::TopicId;
    use time::macros::{date, datetime};

    use super::*;

    fn compile(segment: &Segment) -> Sql {
        let mut sql = Sql::default();
        push_segment_filter(&mut sql, AccountId::from_uuid(Uuid::nil()), segment);
        sql
    }

    #[test]
    fn values_travel_as_parameters() {
        let hostile = "x' OR '1'='1";
        let segment = Segment {
            conditions: vec![
                Condition::String {
                    slug: hostile.into(),
                    operator: StringOperator::Contains,
                    value: hostile.into(),
                },
                Condition::Date {
                    slug: "event.signed_up".into(),
                    operator: DateOperator::Equal,
                    day: date!(2026 - 03 - 01),
                },
            ],
            include_unsubscribed: false,
            topic: Some(TopicId::from_uuid(Uuid::from_u128(9))),
        };
        let sql = compile(&segment);
        assert!(!sql.text.contains('\''), "{}", sql.text);
        assert_eq!(
            sql.text,
            "contacts.account_id = $1 AND contacts.unsubscribed_at IS NULL \
             AND NOT EXISTS (SELECT 1 FROM topic_unsubscriptions u \
             WHERE u.account_id = $1 \
             AND u.contact_id = contacts.id AND u.topic_id = $2) \
             AND EXISTS (SELECT 1 FROM contact_attributes a \
             WHERE a.account_id = $1 \
             AND a.contact_id = contacts.id AND a.slug = $3 \
             AND a.string_value IS NOT NULL \
             AND strpos(lower(a.string_value), lower($4)) > 0) \
             AND EXISTS (SELECT 1 FROM contact_attributes a \
             WHERE a.account_id = $1 \
             AND a.contact_id = contacts.id AND a.slug = $5 \
             AND a.date_value IS NOT NULL AND (a.date_value >= $6 AND a.date_value < $7))"
        );
        assert_eq!(sql.params.len(), 7);
        assert_eq!(sql.params[3], Param::Text(hostile.into()));
        assert_eq!(
            sql.params[5],
            Param::Timestamptz(datetime!(2026-03-01 00:00 UTC))
        );
        assert_eq!(
            sql.params[6],
            Param::Timestamptz(datetime!(2026-03-02 00:00 UTC))
        );
    }

    #[test]
    fn email_contains_is_a_literal_like_pattern() {
        let segment = Segment {
            conditions: vec![
                Condition::String {
                    slug: "email".into(),
                    operator: StringOperator::Contains,
                    value: "A_b%\\".into(),
                },
                Condition::String {
                    slug: "email".into(),
                    operator: StringOperator::NotContains,
                    value: "x".into(),
                },
            ],
            include_unsubscribed: true,
            topic: None,
        };
        let sql = compile(&segment);
        assert_eq!(
            sql.text,
            "contacts.account_id = $1 AND contacts.email_lower LIKE lower($2) \
             AND contacts.email_lower NOT LIKE lower($3)"
        );
        assert_eq!(sql.params[1], Param::Text("%A\\_b\\%\\\\%".into()));
        assert_eq!(sql.params[2], Param::Text("%x%".into()));
    }

    #[test]
    fn probed_subqueries_end_in_offset_0() {
        let segment = Segment {
            conditions: vec![
                Condition::Exists { slug: "a".into() },
                Condition::NotExists { slug: "b".into() },
            ],
            include_unsubscribed: true,
            topic: Some(TopicId::from_uuid(Uuid::from_u128(9))),
        };
        let mut sql = Sql::default();
        push_probed_segment_filter(&mut sql, AccountId::from_uuid(Uuid::nil()), &segment);
        assert_eq!(sql.text.matches(" OFFSET 0)").count(), 3, "{}", sql.text);
        assert!(!compile(&segment).text.contains("OFFSET"));
    }

    #[test]
    fn system_attributes_read_contact_columns() {
        let segment = Segment {
            conditions: vec![
                Condition::String {
                    slug: "email".into(),
                    operator: StringOperator::Equal,
                    value: "A@B.C".into(),
                },
                Condition::Exists {
                    slug: "create_date".into(),
                },
                Condition::Number {
                    slug: "message_count".into(),
                    operator: NumberOperator::LessThanEqual,
                    value: 2.0,
                },
                Condition::NotExists {
                    slug: "email".into(),
                },
                Condition::Boolean {
                    slug: "message_count".into(),
                    expected: true,
                },
            ],
            include_unsubscribed: true,
            topic: None,
        };
        let sql = compile(&segment);
        assert_eq!(
            sql.text,
            "contacts.account_id = $1 AND contacts.email_lower = lower($2) AND TRUE \
             AND contacts.message_count <= $3 AND FALSE AND FALSE"
        );
    }
}
