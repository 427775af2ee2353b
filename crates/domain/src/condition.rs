//! Attribute conditions: the audience filter of announcements and contact search.
//!
//! A condition names an attribute slug, an operator and (for most operators) a value. The
//! operator's family must fit the attribute's type (`s_` string, `n_` number, `d_` date,
//! `true`/`false` boolean; `exists`/`not_exists` any) and the value must fit the operator.
//! Several conditions combine with AND. Strings compare case-insensitively; dates compare
//! by UTC calendar day; a missing attribute matches only `not_exists`.
//!
//! Beside them, engagement conditions ([`engagement`]) test what happened to the contact's
//! messages lately, under reserved `engagement.*` slugs.
//!
//! The same conditions are evaluated here in memory and compiled to SQL by the PostgreSQL
//! adapter; a property test keeps the two in agreement.

pub mod engagement;

use serde_json::Value;
use time::{
    format_description::well_known::Rfc3339, Date, Month, OffsetDateTime, PrimitiveDateTime,
    UtcOffset,
};

use crate::{
    attribute::{AttributeType, AttributeValue, ResolvedAttributes, MAX_STRING_VALUE},
    contact::Contact,
    Timestamp, TopicId, ValidationErrors,
};
use engagement::{Activity, Engagement, MessageActivity};

/// Comparison of a number attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumberOperator {
    /// `n_equal`.
    Equal,
    /// `n_not_equal`.
    NotEqual,
    /// `greater_than`.
    GreaterThan,
    /// `greater_than_equal`.
    GreaterThanEqual,
    /// `less_than`.
    LessThan,
    /// `less_than_equal`.
    LessThanEqual,
}

/// Comparison of a date attribute, by UTC calendar day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateOperator {
    /// `after`: a later day.
    After,
    /// `before`: an earlier day.
    Before,
    /// `d_equal`: the same day.
    Equal,
    /// `d_not_equal`: another day.
    NotEqual,
}

/// Comparison of a string attribute, ignoring case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StringOperator {
    /// `s_equal`.
    Equal,
    /// `s_not_equal`.
    NotEqual,
    /// `contains`.
    Contains,
    /// `not_contains`.
    NotContains,
}

/// A parsed condition, checked against the attribute's type.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// `exists`: the attribute is present.
    Exists {
        /// Attribute slug.
        slug: String,
    },
    /// `not_exists`: the attribute is absent.
    NotExists {
        /// Attribute slug.
        slug: String,
    },
    /// `true` / `false` on a boolean attribute.
    Boolean {
        /// Attribute slug.
        slug: String,
        /// The value it must have.
        expected: bool,
    },
    /// A number comparison.
    Number {
        /// Attribute slug.
        slug: String,
        /// Operator.
        operator: NumberOperator,
        /// Operand.
        value: f64,
    },
    /// A date comparison by UTC day.
    Date {
        /// Attribute slug.
        slug: String,
        /// Operator.
        operator: DateOperator,
        /// The UTC calendar day compared with.
        day: Date,
    },
    /// A case-insensitive string comparison.
    String {
        /// Attribute slug.
        slug: String,
        /// Operator.
        operator: StringOperator,
        /// Operand as given.
        value: String,
    },
    /// An engagement condition on the contact's messages.
    Engagement(Engagement),
}

/// A condition as received: `{slug, operator, value?}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConditionInput {
    /// `slug`.
    pub slug: String,
    /// `operator`.
    pub operator: String,
    /// `value`, if sent.
    pub value: Option<Value>,
}

/// An audience as the API describes it (the body of `POST …/contacts/search`, a saved
/// segment's definition, an announcement's audience fields): conditions as received,
/// before they are parsed against the account's attributes into a [`Segment`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AudienceDefinition {
    /// `attributes`: conditions combined with AND.
    pub attributes: Vec<ConditionInput>,
    /// `includeUnsubscribed`.
    pub include_unsubscribed: bool,
    /// `topicId`: contacts unsubscribed from it are left out.
    pub topic: Option<TopicId>,
}

/// An audience: the contacts that match every condition, minus those unsubscribed from
/// everything (unless `include_unsubscribed`), minus those unsubscribed from `topic`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Segment {
    /// Conditions combined with AND.
    pub conditions: Vec<Condition>,
    /// Whether contacts unsubscribed from everything belong.
    pub include_unsubscribed: bool,
    /// Contacts unsubscribed from this topic do not belong.
    pub topic: Option<TopicId>,
}

/// Looks up the type of an attribute slug in the account (system, custom or event).
pub trait AttributeTypes {
    /// The type of `slug`, or `None` when the account has no such attribute.
    fn attribute_type(&self, slug: &str) -> Option<AttributeType>;
}

/// Every operator name, in the order of the API specification's table.
pub const OPERATORS: [&str; 18] = [
    "exists",
    "not_exists",
    "true",
    "false",
    "n_equal",
    "n_not_equal",
    "greater_than",
    "greater_than_equal",
    "less_than",
    "less_than_equal",
    "after",
    "before",
    "d_equal",
    "d_not_equal",
    "s_equal",
    "s_not_equal",
    "contains",
    "not_contains",
];

/// The earliest operand day: dates are written as RFC 3339, whose years are 0000–9999.
const FIRST_DAY: Date = match Date::from_calendar_date(0, Month::January, 1) {
    Ok(day) => day,
    Err(_) => panic!("0000-01-01 is a valid date"),
};

/// The latest operand day. 9999-12-31 is refused because the start of the day after it,
/// the exclusive end of its [`day_bounds`], cannot be represented.
const LAST_DAY: Date = match Date::from_calendar_date(9999, Month::December, 30) {
    Ok(day) => day,
    Err(_) => panic!("9999-12-30 is a valid date"),
};

/// The names of the operators that apply to an attribute of `attribute_type`: those of
/// its type, and `exists` and `not_exists`, in [`OPERATORS`] order.
pub fn operators_for(attribute_type: AttributeType) -> Vec<&'static str> {
    OPERATORS
        .into_iter()
        .filter(|name| {
            Operator::parse(name).is_some_and(|operator| {
                operator
                    .family()
                    .is_none_or(|family| family == attribute_type)
            })
        })
        .collect()
}

/// An operator as named on the wire, before its operand is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    Exists,
    NotExists,
    Boolean(bool),
    Number(NumberOperator),
    Date(DateOperator),
    String(StringOperator),
}

impl Operator {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "exists" => Self::Exists,
            "not_exists" => Self::NotExists,
            "true" => Self::Boolean(true),
            "false" => Self::Boolean(false),
            "n_equal" => Self::Number(NumberOperator::Equal),
            "n_not_equal" => Self::Number(NumberOperator::NotEqual),
            "greater_than" => Self::Number(NumberOperator::GreaterThan),
            "greater_than_equal" => Self::Number(NumberOperator::GreaterThanEqual),
            "less_than" => Self::Number(NumberOperator::LessThan),
            "less_than_equal" => Self::Number(NumberOperator::LessThanEqual),
            "after" => Self::Date(DateOperator::After),
            "before" => Self::Date(DateOperator::Before),
            "d_equal" => Self::Date(DateOperator::Equal),
            "d_not_equal" => Self::Date(DateOperator::NotEqual),
            "s_equal" => Self::String(StringOperator::Equal),
            "s_not_equal" => Self::String(StringOperator::NotEqual),
            "contains" => Self::String(StringOperator::Contains),
            "not_contains" => Self::String(StringOperator::NotContains),
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::Exists => "exists",
            Self::NotExists => "not_exists",
            Self::Boolean(true) => "true",
            Self::Boolean(false) => "false",
            Self::Number(NumberOperator::Equal) => "n_equal",
            Self::Number(NumberOperator::NotEqual) => "n_not_equal",
            Self::Number(NumberOperator::GreaterThan) => "greater_than",
            Self::Number(NumberOperator::GreaterThanEqual) => "greater_than_equal",
            Self::Number(NumberOperator::LessThan) => "less_than",
            Self::Number(NumberOperator::LessThanEqual) => "less_than_equal",
            Self::Date(DateOperator::After) => "after",
            Self::Date(DateOperator::Before) => "before",
            Self::Date(DateOperator::Equal) => "d_equal",
            Self::Date(DateOperator::NotEqual) => "d_not_equal",
            Self::String(StringOperator::Equal) => "s_equal",
            Self::String(StringOperator::NotEqual) => "s_not_equal",
            Self::String(StringOperator::Contains) => "contains",
            Self::String(StringOperator::NotContains) => "not_contains",
        }
    }

    /// The attribute type the operator applies to, or `None` for any type.
    fn family(self) -> Option<AttributeType> {
        match self {
            Self::Exists | Self::NotExists => None,
            Self::Boolean(_) => Some(AttributeType::Boolean),
            Self::Number(_) => Some(AttributeType::Number),
            Self::Date(_) => Some(AttributeType::Date),
            Self::String(_) => Some(AttributeType::String),
        }
    }

    /// Reads the operand this operator takes and builds the condition on `slug`.
    fn condition(self, slug: &str, value: Option<&Value>) -> Result<Condition, String> {
        let slug = slug.to_owned();
        let name = self.name();
        match self {
            Self::Exists | Self::NotExists | Self::Boolean(_) => match value {
                // Absent and null are accepted too: clients often leave out a value that
                // carries no information.
                None | Some(Value::Null) => Ok(()),
                Some(Value::String(text)) if text.is_empty() => Ok(()),
                Some(_) => Err(format!(
                    "'{name}' takes no value: send the empty string or leave it out"
                )),
            }
            .map(|()| match self {
                Self::Exists => Condition::Exists { slug },
                Self::NotExists => Condition::NotExists { slug },
                _ => Condition::Boolean {
                    slug,
                    expected: self == Self::Boolean(true),
                },
            }),
            Self::Number(operator) => value
                .and_then(Value::as_f64)
                .filter(|number| number.is_finite())
                .map(|value| Condition::Number {
                    slug,
                    operator,
                    value,
                })
                .ok_or_else(|| format!("'{name}' takes a number")),
            Self::Date(operator) => {
                let wanted = "a date (YYYY-MM-DD or an RFC 3339 timestamp)";
                let text = value
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("'{name}' takes {wanted}"))?;
                let day = parse_day(text)
                    .ok_or_else(|| format!("'{name}' takes {wanted}; '{text}' is neither"))?;
                if !(FIRST_DAY..=LAST_DAY).contains(&day) {
                    return Err(format!(
                        "'{name}' takes a day from 0000-01-01 to 9999-12-30 (UTC)"
                    ));
                }
                Ok(Condition::Date {
                    slug,
                    operator,
                    day,
                })
            }
            Self::String(operator) => match value {
                Some(Value::String(text)) if text.chars().count() <= MAX_STRING_VALUE => {
                    Ok(Condition::String {
                        slug,
                        operator,
                        value: text.clone(),
                    })
                }
                Some(Value::String(_)) => Err(format!(
                    "'{name}' takes a string of at most {MAX_STRING_VALUE} characters"
                )),
                _ => Err(format!("'{name}' takes a string")),
            },
        }
    }
}

/// Reads a date operand as its UTC calendar day: an RFC 3339 timestamp with any offset
/// (`2026-03-01T23:30:00-02:00` is 2026-03-02 in UTC), or a plain `YYYY-MM-DD` day.
fn parse_day(text: &str) -> Option<Date> {
    if let Ok(at) = OffsetDateTime::parse(text, &Rfc3339) {
        // checked: 9999-12-31T23:00:00-05:00 is past the last instant `time` represents.
        return at
            .checked_to_offset(UtcOffset::UTC)
            .map(OffsetDateTime::date);
    }
    let bytes = text.as_bytes();
    let shaped = bytes.len() == 10
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes
            .iter()
            .enumerate()
            .all(|(i, b)| i == 4 || i == 7 || b.is_ascii_digit());
    if !shaped {
        return None;
    }
    let year = text[0..4].parse().ok()?;
    let month = Month::try_from(text[5..7].parse::<u8>().ok()?).ok()?;
    Date::from_calendar_date(year, month, text[8..10].parse().ok()?).ok()
}

/// The most conditions one request may carry. Each becomes bind parameters of one query,
/// and PostgreSQL takes at most 65,535 of them; 100 is far beyond any hand-built segment.
pub const MAX_CONDITIONS: usize = 100;

/// Refuses more than [`MAX_CONDITIONS`] conditions, before anything else looks at them.
///
/// # Errors
/// [`ValidationErrors`] on `attributes` naming the limit.
pub fn check_condition_count(inputs: &[ConditionInput]) -> Result<(), ValidationErrors> {
    if inputs.len() > MAX_CONDITIONS {
        return Err(ValidationErrors::single(
            "attributes",
            format!(
                "at most {MAX_CONDITIONS} conditions are accepted per request; got {}",
                inputs.len()
            ),
        ));
    }
    Ok(())
}

/// Parses the conditions of a request against the account's attribute types, collecting
/// every problem under `attributes[i].slug`, `attributes[i].operator` or
/// `attributes[i].value`.
///
/// A slug must name an attribute of the account; the operator must be one of
/// [`OPERATORS`] and its family must fit the attribute's type; the value must fit the
/// operator: the empty string (or nothing) for `exists`, `not_exists`, `true` and `false`,
/// a number for the `n_`/`greater_than`/`less_than` family, a date (`YYYY-MM-DD` or RFC
/// 3339 with any offset, reduced to its UTC day) for `after`, `before` and `d_`, and a
/// string of at most 1000 characters for `s_`, `contains` and `not_contains`.
///
/// An `engagement.*` slug takes the engagement operators instead, its window ending at
/// `as_of` ([`engagement`]).
///
/// # Errors
/// [`ValidationErrors`] naming every offending field.
pub fn parse_conditions(
    inputs: &[ConditionInput],
    types: &dyn AttributeTypes,
    as_of: Timestamp,
) -> Result<Vec<Condition>, ValidationErrors> {
    let mut errors = ValidationErrors::new();
    let mut conditions = Vec::with_capacity(inputs.len());
    for (index, input) in inputs.iter().enumerate() {
        let field = |name: &str| format!("attributes[{index}].{name}");
        if let Some(activity) = Activity::from_slug(&input.slug) {
            match Engagement::parse(activity, &input.operator, input.value.as_ref(), as_of) {
                Ok(engagement) => conditions.push(Condition::Engagement(engagement)),
                Err((name, message)) => errors.push(field(name), message),
            }
            continue;
        }
        if input.slug.starts_with(engagement::SLUG_PREFIX) {
            let known: Vec<&str> = Activity::ALL.iter().map(|a| a.slug()).collect();
            errors.push(
                field("slug"),
                format!(
                    "unknown engagement condition '{}'; allowed: {}",
                    input.slug,
                    known.join(", ")
                ),
            );
            continue;
        }
        let attribute_type = types.attribute_type(&input.slug);
        if attribute_type.is_none() {
            errors.push(field("slug"), format!("unknown attribute '{}'", input.slug));
        }
        let Some(operator) = Operator::parse(&input.operator) else {
            errors.push(
                field("operator"),
                format!(
                    "unknown operator '{}'; allowed: {}",
                    input.operator,
                    OPERATORS.join(", ")
                ),
            );
            continue;
        };
        let mut fits = attribute_type.is_some();
        if let (Some(actual), Some(required)) = (attribute_type, operator.family()) {
            if actual != required {
                fits = false;
                errors.push(
                    field("operator"),
                    format!(
                        "'{}' does not apply to '{}', a {} attribute",
                        operator.name(),
                        input.slug,
                        actual.as_str()
                    ),
                );
            }
        }
        // The value is checked whatever the slug, since its shape depends only on the
        // operator: the client learns about every problem at once.
        match operator.condition(&input.slug, input.value.as_ref()) {
            Ok(condition) if fits => conditions.push(condition),
            Ok(_) => {}
            Err(message) => errors.push(field("value"), message),
        }
    }
    errors.into_result()?;
    Ok(conditions)
}

/// The start of `day` (inclusive) and the start of the next day (exclusive), in UTC: the
/// half-open range of instants whose UTC calendar day is `day`. The SQL side compares
/// stored timestamps with these bounds, which keeps date conditions index-friendly.
///
/// For 9999-12-31, the last day `time` represents (and one [`parse_conditions`] refuses),
/// the end saturates at that day's last millisecond.
pub fn day_bounds(day: Date) -> (Timestamp, Timestamp) {
    let start = day.midnight().assume_utc();
    let end = day
        .next_day()
        .map_or(PrimitiveDateTime::MAX, Date::midnight)
        .assume_utc();
    (
        Timestamp::from_datetime(start),
        Timestamp::from_datetime(end),
    )
}

impl NumberOperator {
    /// Exact comparison of doubles, as PostgreSQL compares `float8`: both sides hold the
    /// same values (finite, never NaN), so there is no tolerance to agree on.
    fn holds(self, attribute: f64, operand: f64) -> bool {
        match self {
            Self::Equal => attribute == operand,
            Self::NotEqual => attribute != operand,
            Self::GreaterThan => attribute > operand,
            Self::GreaterThanEqual => attribute >= operand,
            Self::LessThan => attribute < operand,
            Self::LessThanEqual => attribute <= operand,
        }
    }
}

impl DateOperator {
    fn holds(self, attribute: Date, operand: Date) -> bool {
        match self {
            Self::After => attribute > operand,
            Self::Before => attribute < operand,
            Self::Equal => attribute == operand,
            Self::NotEqual => attribute != operand,
        }
    }
}

impl StringOperator {
    /// Compares after `str::to_lowercase` of both sides. PostgreSQL's `lower()` agrees on
    /// ASCII and Latin-1 letters (the ones tested) in a database whose `LC_CTYPE` knows
    /// Unicode (`C.UTF-8`, `en_US.UTF-8`, ICU); under the plain `C` ctype it lowers ASCII
    /// only. Beyond Latin-1 the two may differ (Rust applies full case mapping, e.g.
    /// `İ` → `i̇`; libc applies simple, one-character mappings).
    fn holds(self, attribute: &str, operand: &str) -> bool {
        let attribute = attribute.to_lowercase();
        let operand = operand.to_lowercase();
        match self {
            Self::Equal => attribute == operand,
            Self::NotEqual => attribute != operand,
            // The empty needle is in every string, as with SQL's strpos.
            Self::Contains => attribute.contains(&operand),
            Self::NotContains => !attribute.contains(&operand),
        }
    }
}

impl Condition {
    /// The slug of the attribute tested.
    pub fn slug(&self) -> &str {
        match self {
            Self::Exists { slug }
            | Self::NotExists { slug }
            | Self::Boolean { slug, .. }
            | Self::Number { slug, .. }
            | Self::Date { slug, .. }
            | Self::String { slug, .. } => slug,
            Self::Engagement(engagement) => engagement.activity.slug(),
        }
    }

    /// The operator's wire name (one of [`OPERATORS`] or [`engagement::ENGAGEMENT_OPERATORS`]).
    pub fn operator_name(&self) -> &'static str {
        match self {
            Self::Exists { .. } => Operator::Exists,
            Self::NotExists { .. } => Operator::NotExists,
            Self::Boolean { expected, .. } => Operator::Boolean(*expected),
            Self::Number { operator, .. } => Operator::Number(*operator),
            Self::Date { operator, .. } => Operator::Date(*operator),
            Self::String { operator, .. } => Operator::String(*operator),
            Self::Engagement(engagement) => return engagement.operator_name(),
        }
        .name()
    }

    /// The condition in its wire shape, for echoing an announcement's audience. Operators
    /// without an operand get the empty string; a date operand becomes its `YYYY-MM-DD`
    /// day (an RFC 3339 operand was reduced to its UTC day when parsed). Parsing the result
    /// (with the same reference time, for an engagement condition) gives this condition
    /// back.
    pub fn to_input(&self) -> ConditionInput {
        let value = match self {
            Self::Exists { .. } | Self::NotExists { .. } | Self::Boolean { .. } => {
                Value::String(String::new())
            }
            Self::Number { value, .. } => {
                serde_json::Number::from_f64(*value).map_or(Value::Null, Value::Number)
            }
            Self::Date { day, .. } => Value::String(format!(
                "{:04}-{:02}-{:02}",
                day.year(),
                u8::from(day.month()),
                day.day()
            )),
            Self::String { value, .. } => Value::String(value.clone()),
            Self::Engagement(engagement) => engagement.value(),
        };
        ConditionInput {
            slug: self.slug().to_owned(),
            operator: self.operator_name().to_owned(),
            value: Some(value),
        }
    }

    /// Whether the contact whose resolved attributes are `attributes` satisfies this
    /// condition. A missing attribute matches only `not_exists`; an attribute whose type
    /// is not the operator's family matches nothing (parsing prevents that, but the
    /// evaluation stays total). An engagement condition reads messages, not attributes:
    /// here it matches nothing ([`Segment::matches`] evaluates it).
    pub fn matches(&self, attributes: &ResolvedAttributes) -> bool {
        self.matches_value(attributes.get(self.slug()))
    }

    /// This condition applied to the value of its attribute, `None` when it is missing.
    pub fn matches_value(&self, value: Option<&AttributeValue>) -> bool {
        let Some(value) = value else {
            return matches!(self, Self::NotExists { .. });
        };
        match (self, value) {
            (Self::Engagement(_), _) => false,
            (Self::Exists { .. }, _) => true,
            (Self::NotExists { .. }, _) => false,
            (Self::Boolean { expected, .. }, AttributeValue::Boolean(flag)) => flag == expected,
            (
                Self::Number {
                    operator,
                    value: operand,
                    ..
                },
                AttributeValue::Number(number),
            ) => operator.holds(*number, *operand),
            (Self::Date { operator, day, .. }, AttributeValue::Date(at)) => {
                // A Timestamp is UTC, so its date is the UTC calendar day.
                operator.holds(at.as_datetime().date(), *day)
            }
            (
                Self::String {
                    operator,
                    value: operand,
                    ..
                },
                AttributeValue::String(text),
            ) => operator.holds(text, operand),
            _ => false,
        }
    }
}

/// The value of a system attribute, read from the contact itself, or `None` for any other
/// slug. Mirrors the SQL side, which reads these from the `contacts` columns.
pub(crate) fn system_value(contact: &Contact, slug: &str) -> Option<AttributeValue> {
    match slug {
        "email" => Some(AttributeValue::String(contact.email.clone())),
        "create_date" => Some(AttributeValue::Date(contact.created_at)),
        "message_count" => Some(AttributeValue::Number(f64::from(contact.message_count))),
        _ => None,
    }
}

impl Segment {
    /// Whether `contact`, with its resolved `attributes` and the activity of its
    /// `messages` (test sends left out), belongs to this audience: every condition
    /// matches, the contact is not unsubscribed from everything (unless
    /// `include_unsubscribed`), and it is not unsubscribed from `topic`.
    ///
    /// The system attributes (`email`, `create_date`, `message_count`) are read from
    /// `contact`, as the SQL side reads them from the contact's columns; engagement
    /// conditions from `messages`; every other slug is looked up in `attributes`.
    pub fn matches(
        &self,
        contact: &Contact,
        attributes: &ResolvedAttributes,
        messages: &[MessageActivity],
    ) -> bool {
        let subscribed = self.include_unsubscribed || contact.unsubscribed_at.is_none();
        let topic_allowed = self
            .topic
            .is_none_or(|topic| !contact.topic_unsubscriptions.contains(&topic));
        subscribed
            && topic_allowed
            && self.conditions.iter().all(|condition| {
                if let Condition::Engagement(engagement) = condition {
                    return engagement.matches(messages);
                }
                match system_value(contact, condition.slug()) {
                    Some(value) => condition.matches_value(Some(&value)),
                    None => condition.matches(attributes),
                }
            })
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod count_tests {
    use super::{check_condition_count, ConditionInput, MAX_CONDITIONS};

    fn inputs(n: usize) -> Vec<ConditionInput> {
        (0..n)
            .map(|_| ConditionInput {
                slug: "email".into(),
                operator: "exists".into(),
                value: None,
            })
            .collect()
    }

    #[test]
    fn at_most_100_conditions() {
        assert_eq!(MAX_CONDITIONS, 100);
        assert!(check_condition_count(&inputs(100)).is_ok());
        let refused = check_condition_count(&inputs(101)).expect_err("101 refused");
        assert_eq!(refused.0[0].field, "attributes");
        assert!(refused.0[0].message.contains("at most 100"));
    }
}
