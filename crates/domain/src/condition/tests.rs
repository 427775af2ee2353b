use std::collections::HashMap;

use serde_json::{json, Value};
use time::macros::date;

use super::*;
use crate::{ContactId, Uuid};

/// The attribute types of a test account: the system ones plus one custom of each type.
struct Types(HashMap<&'static str, AttributeType>);

impl Types {
    fn new() -> Self {
        Self(HashMap::from([
            ("email", AttributeType::String),
            ("create_date", AttributeType::Date),
            ("message_count", AttributeType::Number),
            ("plan", AttributeType::String),
            ("score", AttributeType::Number),
            ("vip", AttributeType::Boolean),
            ("renewal", AttributeType::Date),
            ("event.signed_up", AttributeType::Date),
        ]))
    }
}

impl AttributeTypes for Types {
    fn attribute_type(&self, slug: &str) -> Option<AttributeType> {
        self.0.get(slug).copied()
    }
}

fn input(slug: &str, operator: &str, value: Value) -> ConditionInput {
    ConditionInput {
        slug: slug.into(),
        operator: operator.into(),
        value: Some(value),
    }
}

fn parse_one(slug: &str, operator: &str, value: Value) -> Result<Condition, ValidationErrors> {
    parse_conditions(&[input(slug, operator, value)], &Types::new(), as_of()).map(
        |mut conditions| {
            assert_eq!(conditions.len(), 1);
            conditions.remove(0)
        },
    )
}

/// The reference time of engagement windows in these tests.
fn as_of() -> Timestamp {
    Timestamp::parse("2026-06-30T12:00:00Z").expect("test time")
}

fn fields(errors: &ValidationErrors) -> Vec<&str> {
    errors.0.iter().map(|e| e.field.as_str()).collect()
}

fn at(text: &str) -> AttributeValue {
    AttributeValue::Date(Timestamp::parse(text).expect("test timestamp"))
}

fn attributes(pairs: &[(&str, AttributeValue)]) -> ResolvedAttributes {
    pairs
        .iter()
        .map(|(slug, value)| ((*slug).to_owned(), value.clone()))
        .collect()
}

/// Parses `{slug, operator, value}` and evaluates it on a contact whose `slug` is `stored`.
fn holds(slug: &str, operator: &str, value: Value, stored: AttributeValue) -> bool {
    let condition = parse_one(slug, operator, value).expect("valid condition");
    condition.matches(&attributes(&[(slug, stored)]))
}

fn contact() -> Contact {
    Contact {
        id: ContactId::from_uuid(Uuid::nil()),
        email: "Ann@Example.com".into(),
        created_at: Timestamp::parse("2026-03-01T23:59:59.999Z").expect("valid"),
        hard_bounced_at: None,
        complaint_at: None,
        unsubscribed_at: None,
        topic_unsubscriptions: Vec::new(),
        message_count: 3,
        pending_since: None,
        confirmed_at: None,
    }
}

#[test]
fn operator_names_round_trip() {
    for name in OPERATORS {
        let operator = Operator::parse(name).expect(name);
        assert_eq!(operator.name(), name);
    }
    assert_eq!(Operator::parse("equal"), None);
    assert_eq!(Operator::parse("S_EQUAL"), None);
}

#[test]
fn every_operator_matches_and_misses() {
    use AttributeValue::{Boolean, Number, String as Text};
    let text = |s: &str| Text(s.to_owned());
    // (slug, operator, operand, a stored value that matches, one that does not)
    let cases: Vec<(&str, &str, Value, AttributeValue, AttributeValue)> = vec![
        ("plan", "exists", json!(""), text("pro"), text("")), // present either way
        ("vip", "true", json!(""), Boolean(true), Boolean(false)),
        ("vip", "false", json!(""), Boolean(false), Boolean(true)),
        ("score", "n_equal", json!(2), Number(2.0), Number(2.5)),
        ("score", "n_not_equal", json!(2), Number(2.5), Number(2.0)),
        ("score", "greater_than", json!(2), Number(2.5), Number(2.0)),
        (
            "score",
            "greater_than_equal",
            json!(2),
            Number(2.0),
            Number(1.5),
        ),
        (
            "score",
            "less_than",
            json!(-1.5),
            Number(-2.0),
            Number(-1.5),
        ),
        (
            "score",
            "less_than_equal",
            json!(-1.5),
            Number(-1.5),
            Number(-1.0),
        ),
        (
            "renewal",
            "after",
            json!("2026-03-01"),
            at("2026-03-02T00:00:00Z"),
            at("2026-03-01T23:59:59.999Z"),
        ),
        (
            "renewal",
            "before",
            json!("2026-03-01"),
            at("2026-02-28T23:59:59.999Z"),
            at("2026-03-01T00:00:00Z"),
        ),
        (
            "renewal",
            "d_equal",
            json!("2026-03-01"),
            at("2026-03-01T12:00:00Z"),
            at("2026-03-02T00:00:00Z"),
        ),
        (
            "renewal",
            "d_not_equal",
            json!("2026-03-01"),
            at("2026-02-28T23:59:59.999Z"),
            at("2026-03-01T00:00:00Z"),
        ),
        ("plan", "s_equal", json!("Pro"), text("pRO"), text("pros")),
        (
            "plan",
            "s_not_equal",
            json!("Pro"),
            text("pros"),
            text("PRO"),
        ),
        ("plan", "contains", json!("RO"), text("pro"), text("plan")),
        (
            "plan",
            "not_contains",
            json!("RO"),
            text("plan"),
            text("Pro"),
        ),
    ];
    for (slug, operator, operand, yes, no) in cases {
        assert!(
            holds(slug, operator, operand.clone(), yes.clone()),
            "{slug} {operator} {operand} on {yes:?}"
        );
        if operator != "exists" {
            assert!(
                !holds(slug, operator, operand.clone(), no.clone()),
                "{slug} {operator} {operand} on {no:?}"
            );
        }
    }
    // not_exists: the mirror image of exists.
    let not_exists = parse_one("plan", "not_exists", json!("")).expect("valid");
    assert!(not_exists.matches(&attributes(&[])));
    assert!(!not_exists.matches(&attributes(&[("plan", text(""))])));
    let exists = parse_one("plan", "exists", json!("")).expect("valid");
    assert!(!exists.matches(&attributes(&[("score", Number(1.0))])));
}

#[test]
fn a_missing_attribute_matches_only_not_exists() {
    let empty = ResolvedAttributes::new();
    let cases = [
        ("plan", "not_exists", json!("")),
        ("plan", "exists", json!("")),
        ("vip", "true", json!("")),
        ("vip", "false", json!("")),
        ("score", "n_not_equal", json!(1)),
        ("score", "less_than", json!(1)),
        ("renewal", "d_not_equal", json!("2026-03-01")),
        ("renewal", "before", json!("2026-03-01")),
        ("plan", "s_not_equal", json!("x")),
        ("plan", "not_contains", json!("x")),
        ("plan", "contains", json!("")),
    ];
    for (slug, operator, value) in cases {
        let condition = parse_one(slug, operator, value).expect("valid");
        assert_eq!(
            condition.matches(&empty),
            operator == "not_exists",
            "{slug} {operator}"
        );
    }
}

#[test]
fn another_type_at_evaluation_does_not_match() {
    // Parsing prevents this; evaluation stays total and says no.
    let stored = attributes(&[("x", AttributeValue::String("1".into()))]);
    let conditions = [
        Condition::Number {
            slug: "x".into(),
            operator: NumberOperator::NotEqual,
            value: 2.0,
        },
        Condition::Boolean {
            slug: "x".into(),
            expected: false,
        },
        Condition::Date {
            slug: "x".into(),
            operator: DateOperator::NotEqual,
            day: date!(2026 - 03 - 01),
        },
    ];
    for condition in conditions {
        assert!(!condition.matches(&stored), "{condition:?}");
    }
    let number = attributes(&[("x", AttributeValue::Number(1.0))]);
    let string = Condition::String {
        slug: "x".into(),
        operator: StringOperator::NotContains,
        value: "z".into(),
    };
    assert!(!string.matches(&number));
}

#[test]
fn strings_ignore_case_including_latin_1() {
    let stored = AttributeValue::String("Élan VITAL".into());
    assert!(holds(
        "plan",
        "s_equal",
        json!("élan vital"),
        stored.clone()
    ));
    assert!(holds("plan", "contains", json!("LAN v"), stored.clone()));
    assert!(holds("plan", "contains", json!("éLAN"), stored.clone()));
    assert!(holds("plan", "contains", json!(""), stored.clone()));
    assert!(!holds("plan", "not_contains", json!(""), stored.clone()));
    assert!(!holds(
        "plan",
        "s_not_equal",
        json!("ÉLAN VITAL"),
        stored.clone()
    ));
    assert!(holds("plan", "s_not_equal", json!("elan vital"), stored));
    // The empty string is a value like any other.
    assert!(holds(
        "plan",
        "s_equal",
        json!(""),
        AttributeValue::String(String::new())
    ));
}

#[test]
fn dates_compare_by_utc_day() {
    let d_equal =
        |operand: &str, stored: &str| holds("renewal", "d_equal", json!(operand), at(stored));
    // The last millisecond of a day and the first of the next are different days.
    assert!(d_equal("2026-03-01", "2026-03-01T23:59:59.999Z"));
    assert!(!d_equal("2026-03-01", "2026-03-02T00:00:00.000Z"));
    assert!(d_equal("2026-03-01", "2026-03-01T00:00:00.000Z"));
    // A stored time with an offset counts on its UTC day: 01:00+02:00 is 23:00Z the day before.
    assert!(d_equal("2026-03-01", "2026-03-02T01:00:00+02:00"));
    assert!(d_equal("2026-03-02", "2026-03-01T23:30:00-02:00"));
    // An operand with an offset is reduced to its UTC day too.
    assert!(d_equal("2026-03-02T01:00:00+02:00", "2026-03-01T05:00:00Z"));
    assert!(d_equal("2026-03-01T23:30:00-02:00", "2026-03-02T05:00:00Z"));
    assert!(d_equal("2026-03-01T10:00:00Z", "2026-03-01T00:00:00Z"));
    // after/before are strict: the same day is neither.
    assert!(!holds(
        "renewal",
        "after",
        json!("2026-03-01"),
        at("2026-03-01T23:59:59.999Z")
    ));
    assert!(!holds(
        "renewal",
        "before",
        json!("2026-03-01"),
        at("2026-03-01T00:00:00Z")
    ));
    assert!(holds(
        "event.signed_up",
        "after",
        json!("2026-02-28"),
        at("2026-03-01T00:00:00Z")
    ));
}

#[test]
fn date_operands_and_their_range() {
    let day = |value: Value| match parse_one("renewal", "d_equal", value) {
        Ok(Condition::Date { day, .. }) => Ok(day),
        Ok(other) => panic!("not a date condition: {other:?}"),
        Err(errors) => Err(errors),
    };
    assert_eq!(day(json!("2024-02-29")), Ok(date!(2024 - 02 - 29)));
    assert_eq!(day(json!("0000-01-01")), Ok(date!(0000 - 01 - 01)));
    assert_eq!(day(json!("9999-12-30")), Ok(date!(9999 - 12 - 30)));
    for bad in [
        json!("2026-02-29"),
        json!("2026-3-1"),
        json!("2026/03/01"),
        json!("+2026-03-01"),
        json!("2026-03-01T10:00:00"),
        json!("yesterday"),
        json!(""),
        // The day after would be unrepresentable, so 9999-12-31 is refused…
        json!("9999-12-31"),
        // …and an instant past the last one `time` knows is refused, not a panic.
        json!("9999-12-31T23:00:00-05:00"),
        // Before year 0 in UTC.
        json!("0000-01-01T00:30:00+01:00"),
        json!(20260301),
    ] {
        let errors = day(bad.clone()).expect_err(&bad.to_string());
        assert_eq!(fields(&errors), ["attributes[0].value"], "{bad}");
    }
}

#[test]
fn day_bounds_are_half_open_in_utc() {
    let (start, end) = day_bounds(date!(2026 - 02 - 28));
    assert_eq!(start.to_string(), "2026-02-28T00:00:00.000Z");
    assert_eq!(end.to_string(), "2026-03-01T00:00:00.000Z");
    let (_, year_end) = day_bounds(date!(2026 - 12 - 31));
    assert_eq!(year_end.to_string(), "2027-01-01T00:00:00.000Z");
    // The last representable day saturates instead of panicking.
    let (_, last) = day_bounds(Date::MAX);
    assert_eq!(last.to_string(), "9999-12-31T23:59:59.999Z");
}

#[test]
fn unknown_slug_is_refused() {
    let errors = parse_one("nickname", "exists", json!("")).expect_err("unknown");
    assert_eq!(fields(&errors), ["attributes[0].slug"]);
    assert_eq!(errors.0[0].message, "unknown attribute 'nickname'");
}

#[test]
fn unknown_operator_lists_the_allowed_ones() {
    let errors = parse_one("plan", "equals", json!("x")).expect_err("unknown");
    assert_eq!(fields(&errors), ["attributes[0].operator"]);
    let message = &errors.0[0].message;
    assert!(
        message.starts_with("unknown operator 'equals'"),
        "{message}"
    );
    for name in OPERATORS {
        assert!(message.contains(name), "{message} lacks {name}");
    }
}

#[test]
fn the_family_must_fit_the_type() {
    let cases = [
        ("plan", "n_equal", json!(1), "string"),
        ("plan", "true", json!(""), "string"),
        ("score", "s_equal", json!("1"), "number"),
        ("score", "after", json!("2026-03-01"), "number"),
        ("vip", "contains", json!("t"), "boolean"),
        ("renewal", "greater_than", json!(1), "date"),
        ("email", "d_equal", json!("2026-03-01"), "string"),
        ("create_date", "s_equal", json!("x"), "date"),
        ("message_count", "false", json!(""), "number"),
    ];
    for (slug, operator, value, type_name) in cases {
        let errors = parse_one(slug, operator, value).expect_err(operator);
        assert_eq!(
            fields(&errors),
            ["attributes[0].operator"],
            "{slug} {operator}"
        );
        let message = &errors.0[0].message;
        assert!(
            message.contains(&format!("a {type_name} attribute")),
            "{message}"
        );
    }
    // exists and not_exists fit every type.
    for slug in [
        "plan",
        "score",
        "vip",
        "renewal",
        "email",
        "create_date",
        "message_count",
    ] {
        assert!(parse_one(slug, "exists", json!("")).is_ok(), "{slug}");
        assert!(parse_one(slug, "not_exists", json!("")).is_ok(), "{slug}");
    }
}

#[test]
fn the_value_must_fit_the_operator() {
    let refused = [
        ("plan", "exists", Some(json!("x"))),
        ("plan", "not_exists", Some(json!(0))),
        ("vip", "true", Some(json!(true))),
        ("vip", "false", Some(json!("false"))),
        ("score", "n_equal", Some(json!("1"))),
        ("score", "greater_than", None),
        ("score", "less_than", Some(json!(null))),
        ("renewal", "after", Some(json!(1))),
        ("renewal", "before", None),
        ("plan", "s_equal", Some(json!(1))),
        ("plan", "contains", None),
        ("plan", "not_contains", Some(json!(["a"]))),
        ("plan", "s_equal", Some(json!("x".repeat(1001)))),
    ];
    for (slug, operator, value) in refused {
        let condition = ConditionInput {
            slug: slug.into(),
            operator: operator.into(),
            value: value.clone(),
        };
        let errors = parse_conditions(&[condition], &Types::new(), as_of()).expect_err(operator);
        assert_eq!(
            fields(&errors),
            ["attributes[0].value"],
            "{slug} {operator} {value:?}"
        );
    }
    // No value, null and "" all mean "no operand".
    for value in [None, Some(json!(null)), Some(json!(""))] {
        let condition = ConditionInput {
            slug: "vip".into(),
            operator: "true".into(),
            value,
        };
        let parsed = parse_conditions(&[condition], &Types::new(), as_of()).expect("valid");
        assert_eq!(
            parsed,
            [Condition::Boolean {
                slug: "vip".into(),
                expected: true
            }]
        );
    }
    assert!(parse_one("plan", "s_equal", json!("x".repeat(1000))).is_ok());
    assert!(parse_one("plan", "s_equal", json!("é".repeat(1000))).is_ok());
    assert!(parse_one("score", "n_equal", json!(1.5e300)).is_ok());
}

#[test]
fn every_problem_is_collected_with_its_index() {
    let inputs = [
        input("plan", "s_equal", json!("ok")),
        input("nickname", "bogus", json!(1)),
        input("score", "contains", json!(3)),
        input("nope", "after", json!("soon")),
    ];
    let errors = parse_conditions(&inputs, &Types::new(), as_of()).expect_err("invalid");
    assert_eq!(
        fields(&errors),
        [
            "attributes[1].slug",
            "attributes[1].operator",
            "attributes[2].operator",
            "attributes[2].value",
            "attributes[3].slug",
            "attributes[3].value",
        ]
    );
    let parsed = parse_conditions(&inputs[..1], &Types::new(), as_of()).expect("valid");
    assert_eq!(parsed[0].slug(), "plan");
    assert_eq!(
        parse_conditions(&[], &Types::new(), as_of()),
        Ok(Vec::new())
    );
}

#[test]
fn to_input_parses_back_to_the_same_condition() {
    let inputs = [
        input("plan", "not_contains", json!("É")),
        input("score", "less_than_equal", json!(-2.5)),
        input("vip", "false", json!("")),
        input("renewal", "d_not_equal", json!("2026-03-01T23:30:00-02:00")),
        input("event.signed_up", "exists", json!("")),
        input("email", "not_exists", json!("")),
        input("engagement.clicked", "not_within_days", json!(90)),
        input(
            "engagement.opened",
            "within_days",
            json!({"days": 3, "announcementId": Uuid::from_u128(4).to_string()}),
        ),
    ];
    let parsed = parse_conditions(&inputs, &Types::new(), as_of()).expect("valid");
    let echoed: Vec<ConditionInput> = parsed.iter().map(Condition::to_input).collect();
    assert_eq!(echoed[3].value, Some(json!("2026-03-02")));
    assert_eq!(
        parse_conditions(&echoed, &Types::new(), as_of()),
        Ok(parsed)
    );
}

#[test]
fn segments_apply_unsubscription_and_topic() {
    let topic = TopicId::from_uuid(Uuid::from_u128(7));
    let other_topic = TopicId::from_uuid(Uuid::from_u128(8));
    let none = ResolvedAttributes::new();
    let mut member = contact();
    assert!(Segment::default().matches(&member, &none, &[]));

    member.unsubscribed_at = Some(Timestamp::parse("2026-01-01T00:00:00Z").expect("valid"));
    assert!(!Segment::default().matches(&member, &none, &[]));
    let everyone = Segment {
        include_unsubscribed: true,
        ..Segment::default()
    };
    assert!(everyone.matches(&member, &none, &[]));

    let mut member = contact();
    member.topic_unsubscriptions = vec![other_topic];
    let by_topic = Segment {
        topic: Some(topic),
        ..Segment::default()
    };
    assert!(by_topic.matches(&member, &none, &[]));
    member.topic_unsubscriptions.push(topic);
    assert!(!by_topic.matches(&member, &none, &[]));
    // include_unsubscribed does not override a topic unsubscription.
    let by_topic_everyone = Segment {
        include_unsubscribed: true,
        ..by_topic
    };
    assert!(!by_topic_everyone.matches(&member, &none, &[]));
}

#[test]
fn segments_combine_conditions_and_read_system_attributes_from_the_contact() {
    let types = Types::new();
    let parse = |inputs: &[ConditionInput]| Segment {
        conditions: parse_conditions(inputs, &types, as_of()).expect("valid"),
        ..Segment::default()
    };
    let member = contact();
    let stored = attributes(&[("plan", AttributeValue::String("Pro".into()))]);
    // The map holds no system attribute: they come from the contact.
    assert!(parse(&[input("email", "contains", json!("EXAMPLE"))]).matches(&member, &stored, &[]));
    assert!(
        parse(&[input("create_date", "d_equal", json!("2026-03-01"))]).matches(
            &member,
            &stored,
            &[]
        )
    );
    assert!(
        parse(&[input("message_count", "greater_than", json!(2))]).matches(&member, &stored, &[])
    );
    assert!(!parse(&[input("email", "not_exists", json!(""))]).matches(&member, &stored, &[]));
    // AND of all conditions.
    let both = parse(&[
        input("plan", "s_equal", json!("pro")),
        input("message_count", "less_than", json!(3)),
    ]);
    assert!(!both.matches(&member, &stored, &[]));
    let both = parse(&[
        input("plan", "s_equal", json!("pro")),
        input("message_count", "less_than_equal", json!(3)),
    ]);
    assert!(both.matches(&member, &stored, &[]));
}

#[test]
fn engagement_conditions_read_the_messages_and_report_their_fields() {
    let member = contact();
    let opened = MessageActivity {
        announcement: None,
        template: crate::TemplateId::from_uuid(Uuid::from_u128(3)),
        sent_at: Some(as_of()),
        opened_at: Some(as_of()),
        clicked_at: None,
        bounced_at: None,
    };
    let segment = |inputs: &[ConditionInput]| Segment {
        conditions: parse_conditions(inputs, &Types::new(), as_of()).expect("valid"),
        ..Segment::default()
    };
    let opened_lately = segment(&[input("engagement.opened", "within_days", json!(30))]);
    assert!(opened_lately.matches(&member, &attributes(&[]), std::slice::from_ref(&opened)));
    assert!(!opened_lately.matches(&member, &attributes(&[]), &[]));
    let never_clicked = segment(&[input("engagement.clicked", "not_within_days", json!(30))]);
    assert!(never_clicked.matches(&member, &attributes(&[]), &[opened]));

    let errors = parse_conditions(
        &[
            input("engagement.opened", "after", json!(3)),
            input("engagement.sent", "within_days", json!(0)),
            input("engagement.viewed", "within_days", json!(3)),
        ],
        &Types::new(),
        as_of(),
    )
    .expect_err("invalid");
    assert_eq!(
        fields(&errors),
        [
            "attributes[0].operator",
            "attributes[1].value",
            "attributes[2].slug"
        ]
    );
}

#[test]
fn each_type_is_offered_its_own_operators_and_the_two_for_any() {
    assert_eq!(
        operators_for(AttributeType::Boolean),
        ["exists", "not_exists", "true", "false"]
    );
    assert_eq!(
        operators_for(AttributeType::String),
        [
            "exists",
            "not_exists",
            "s_equal",
            "s_not_equal",
            "contains",
            "not_contains"
        ]
    );
    assert_eq!(operators_for(AttributeType::Number).len(), 8);
    assert_eq!(operators_for(AttributeType::Date).len(), 6);
}
