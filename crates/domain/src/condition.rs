//! Attribute conditions: the audience filter of announcements and contact search.
//!
//! A condition names an attribute slug, an operator and (for most operators) a value. The
//! operator's family must fit the attribute's type (`s_` string, `n_` number, `d_` date,
//! `true`/`false` boolean; `exists`/`not_exists` any) and the value must fit the operator.
//! Several conditions combine with AND. Strings compare case-insensitively; dates compare
//! by UTC calendar day; a missing attribute matches only `not_exists`.
//!
//! The same conditions are evaluated here in memory and compiled to SQL by the PostgreSQL
//! adapter; a property test keeps the two in agreement.

use serde_json::Value;
use time::{format_description::well_known::Rfc3339, Date, Month, OffsetDateTime, PrimitiveDateTime, UtcOffset};

use crate::{
    attribute::{AttributeType, AttributeValue, ResolvedAttributes, MAX_STRING_VALUE},
    contact::Contact,
    Timestamp, TopicId, ValidationErrors,
};

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
}

/// A condition as received: `{slug, operator, value?}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConditionInput {
    /// `slug`.
    pub slug: String,
    /// `operator`.
    pub operator: String,
    /// `value`, if sent.
    pub value: Option<serde_json::Value>,
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
