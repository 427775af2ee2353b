//! The typed slots (migration 31, docs/operations.md "What lists and counts read") against a real
//! database: after writes of every kind the repository makes (a contact's attributes, an
//! event, an import that creates and updates, a delete), every contact's `contact_slots`
//! row equals the pivot of its attribute rows (event dates take no slot); and metas
//! created at the same time by several connections take distinct slots.

use std::{sync::Barrier, thread};

use diesel::{connection::SimpleConnection, pg::PgConnection, sql_query, sql_types, RunQueryDsl};
use mailroom_app::ports::{in_transaction, EventOfEmail, ImportedContact};
use mailroom_domain::{
    attribute::{AttributeSource, AttributeType, AttributeValue},
    condition::{Condition, NumberOperator, Segment, StringOperator},
    email::EmailAddress,
    paging::PageRequest,
    slug::EventSlug,
    AccountId, ContactEventId, ContactId, Timestamp, Uuid,
};
use mailroom_postgres::{search_plan, search_segment_with, PgDatabase, PoolSettings, SegmentPlan};
use mailroom_test_support::TestDatabase;

const ACCOUNT: &str = "0190a000-0000-7000-8000-000000000001";
const TYPES: [&str; 4] = ["string", "number", "boolean", "date"];

fn account() -> AccountId {
    AccountId::from_uuid(Uuid::parse_str(ACCOUNT).expect("account id"))
}

fn database(db: &TestDatabase) -> PgDatabase {
    let settings = PoolSettings {
        max_size: 8,
        ..PoolSettings::default()
    };
    PgDatabase::connect(db.url(), &settings).expect("pool")
}

fn create_account(conn: &mut PgConnection) {
    conn.batch_execute(&format!(
        "INSERT INTO accounts (id, name, created_at) VALUES ('{ACCOUNT}', 'slots', now())"
    ))
    .expect("account");
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = sql_types::BigInt)]
    count: i64,
}

fn count(conn: &mut PgConnection, sql: &str) -> i64 {
    sql_query(sql).get_result::<Count>(conn).expect(sql).count
}

/// How many contacts' slot rows differ from the pivot of their attribute rows through
/// their metas' slots (a missing or extra row counts too: a contact has a row exactly
/// when it has a slotted value).
fn differing(conn: &mut PgConnection) -> i64 {
    let columns: Vec<String> = TYPES
        .iter()
        .flat_map(|kind| {
            // String slots hold the value lowered.
            let value = match *kind {
                "boolean" => "a.bool_value".to_owned(),
                "string" => "lower(a.string_value)".to_owned(),
                _ => format!("a.{kind}_value"),
            };
            let aggregate = if *kind == "boolean" { "bool_or" } else { "max" };
            (1..=4).map(move |slot| {
                format!(
                    "{aggregate}({value}) FILTER (WHERE m.attribute_type = '{kind}' \
                     AND m.slot = {slot})"
                )
            })
        })
        .collect();
    count(
        conn,
        &format!(
            "WITH pivot AS (\
               SELECT a.account_id, a.contact_id, {} \
               FROM contact_attributes a \
               JOIN attribute_metas m ON m.account_id = a.account_id AND m.slug = a.slug \
                                     AND m.slot IS NOT NULL \
               GROUP BY a.account_id, a.contact_id) \
             SELECT count(*) AS count FROM (\
               (SELECT * FROM pivot EXCEPT SELECT * FROM contact_slots) \
               UNION ALL \
               (SELECT * FROM contact_slots EXCEPT SELECT * FROM pivot)) d",
            columns.join(", ")
        ),
    )
}

fn at(text: &str) -> Timestamp {
    Timestamp::parse(text).expect("timestamp")
}

fn email(index: usize) -> EmailAddress {
    EmailAddress::parse(&format!("c{index}@example.org")).expect("email")
}

fn contact_id(index: usize) -> ContactId {
    ContactId::from_uuid(Uuid::from_u128(
        0x0190_a000_0000_7000_8000_0000_0000_1000 + index as u128,
    ))
}

#[test]
fn slots_equal_the_attribute_rows_after_writes_of_every_kind() {
    let db = TestDatabase::create();
    let mut conn = db.connection();
    create_account(&mut conn);
    let database = database(&db);
    let account = account();
    let now = at("2026-03-01T12:00:00Z");
    // Five numbers: the fifth has no slot and must stay out of every row.
    let metas: Vec<(String, AttributeType, AttributeSource)> = [
        ("plan", AttributeType::String),
        ("n1", AttributeType::Number),
        ("n2", AttributeType::Number),
        ("n3", AttributeType::Number),
        ("n4", AttributeType::Number),
        ("n5", AttributeType::Number),
        ("vip", AttributeType::Boolean),
    ]
    .into_iter()
    .map(|(slug, kind)| (slug.to_owned(), kind, AttributeSource::Custom))
    .collect();
    in_transaction(&database, |tx| {
        tx.ensure_attribute_metas(account, &metas, now)?;
        // Contacts one by one, with attributes written, then overwritten.
        for index in 0..20 {
            let (id, _) = tx.upsert_contact_id(account, contact_id(index), &email(index), now)?;
            let number = f64::from(u32::try_from(index).expect("small"));
            tx.set_attributes(
                account,
                id,
                &[
                    (
                        "plan".into(),
                        AttributeValue::String(format!("Plan {}", index % 3)),
                    ),
                    ("n1".into(), AttributeValue::Number(number)),
                    ("n5".into(), AttributeValue::Number(-number)),
                ],
            )?;
            if index % 2 == 0 {
                tx.set_attributes(
                    account,
                    id,
                    &[
                        ("n1".into(), AttributeValue::Number(number + 0.5)),
                        ("n4".into(), AttributeValue::Number(4.0)),
                        ("vip".into(), AttributeValue::Boolean(index % 4 == 0)),
                    ],
                )?;
            }
        }
        // A contact whose only value has no slot gets no slot row.
        let (unslotted, _) = tx.upsert_contact_id(account, contact_id(99), &email(99), now)?;
        tx.set_attributes(
            account,
            unslotted,
            &[("n5".into(), AttributeValue::Number(5.0))],
        )?;
        Ok(())
    })
    .expect("contacts");
    // Events: each moves its `event.<slug>` date forward (insert, then update).
    in_transaction(&database, |tx| {
        for (round, when) in ["2026-03-02T00:00:00Z", "2026-03-03T00:00:00Z"]
            .iter()
            .enumerate()
        {
            let slug = EventSlug::normalize("signed_up").expect("slug");
            for index in (round..20).step_by(3) {
                let recorded = tx.record_event(
                    account,
                    &EventOfEmail {
                        id: ContactEventId::from_uuid(Uuid::now_v7()),
                        email: &email(index),
                        new_contact: contact_id(100 + index),
                        slug: &slug,
                        occurred_at: at(when),
                    },
                )?;
                assert_eq!(recorded.contact_id, contact_id(index), "found by email");
            }
        }
        Ok(())
    })
    .expect("events");
    // An import that updates ten known contacts and creates ten new ones.
    let imported: Vec<ImportedContact> = (10..30)
        .map(|index| ImportedContact {
            email: email(index),
            new_id: contact_id(index),
            values: vec![
                ("n2".into(), AttributeValue::Number(2.0)),
                ("plan".into(), AttributeValue::String("Imported".into())),
            ],
        })
        .collect();
    in_transaction(&database, |tx| {
        tx.import_contacts(account, &imported, now)?;
        tx.delete_contact(account, contact_id(3))?;
        Ok(())
    })
    .expect("import");

    assert_eq!(
        differing(&mut conn),
        0,
        "slot rows differ from the attribute rows"
    );
    // The rows are not trivially equal: every contact but the one with only `n5` has
    // slotted values (so a row), the slots are filled, and the fifth number is in none.
    assert_eq!(
        count(&mut conn, "SELECT count(*) AS count FROM contacts"),
        30
    );
    assert_eq!(
        count(&mut conn, "SELECT count(*) AS count FROM contact_slots"),
        29
    );
    assert_eq!(
        count(
            &mut conn,
            "SELECT count(*) AS count FROM contact_slots WHERE lower(string_1) = 'imported'"
        ),
        20
    );
    // Events wrote `event.signed_up` for fourteen contacts (one since deleted), but event
    // dates take no slot: they are the hottest writes.
    assert_eq!(
        count(
            &mut conn,
            "SELECT count(*) AS count FROM contact_attributes WHERE slug = 'event.signed_up'"
        ),
        13
    );
    assert_eq!(
        count(
            &mut conn,
            "SELECT count(*) AS count FROM contact_slots WHERE date_1 IS NOT NULL"
        ),
        0
    );
    assert_eq!(
        count(
            &mut conn,
            "SELECT count(*) AS count FROM contact_slots \
             WHERE number_1 = 8.5 AND number_4 = 4 AND boolean_1 AND number_2 IS NULL"
        ),
        1
    );
    assert_eq!(
        count(
            &mut conn,
            "SELECT count(*) AS count FROM attribute_metas \
             WHERE slug IN ('n5', 'event.signed_up') AND slot IS NULL"
        ),
        2
    );

    // A page whose conditions all name slotted attributes reads the slot rows; one on the
    // unslotted fifth number does not. Both answer as the general walk does.
    let segment = |conditions| Segment {
        conditions,
        include_unsubscribed: true,
        topic: None,
    };
    let slotted = segment(vec![
        Condition::String {
            slug: "plan".into(),
            operator: StringOperator::Equal,
            value: "IMPORTED".into(),
        },
        Condition::Number {
            slug: "n2".into(),
            operator: NumberOperator::Equal,
            value: 2.0,
        },
    ]);
    let unslotted = segment(vec![Condition::Number {
        slug: "n5".into(),
        operator: NumberOperator::LessThan,
        value: -10.0,
    }]);
    let page = PageRequest {
        start: 0,
        limit: 100,
    };
    for (segment, reads_slots, expected) in [
        (&slotted, true, (10..30).map(contact_id).collect::<Vec<_>>()),
        (&unslotted, false, (11..20).map(contact_id).collect()),
    ] {
        let plan = search_plan(&mut conn, account, segment).expect("plan");
        assert_eq!(
            matches!(plan, SegmentPlan::Slots { .. }),
            reads_slots,
            "{plan:?} for {segment:?}"
        );
        let found =
            search_segment_with(&mut conn, account, segment, page, None, &plan).expect("page");
        let walked = search_segment_with(
            &mut conn,
            account,
            segment,
            page,
            None,
            &SegmentPlan::General,
        )
        .expect("general page");
        assert_eq!(found, expected, "{plan:?}");
        assert_eq!(walked, expected, "general walk");
    }
}

#[test]
fn metas_created_at_once_take_distinct_slots() {
    let db = TestDatabase::create();
    create_account(&mut db.connection());
    let database = database(&db);
    let account = account();
    let now = at("2026-03-01T12:00:00Z");
    let writers = 6;
    let barrier = Barrier::new(writers);
    thread::scope(|scope| {
        for writer in 0..writers {
            let (database, barrier) = (&database, &barrier);
            scope.spawn(move || {
                barrier.wait();
                // Each writer creates two new number slugs; some share a slug with
                // another writer, whose insert then does nothing.
                let metas = [writer, (writer + 1) % writers].map(|n| {
                    (
                        format!("n{n}"),
                        AttributeType::Number,
                        AttributeSource::Custom,
                    )
                });
                in_transaction(database, |tx| {
                    tx.ensure_attribute_metas(account, &metas, now)?;
                    Ok(())
                })
                .expect("metas");
            });
        }
    });
    let mut conn = db.connection();
    assert_eq!(
        count(&mut conn, "SELECT count(*) AS count FROM attribute_metas"),
        i64::try_from(writers).expect("small")
    );
    assert_eq!(
        count(
            &mut conn,
            "SELECT count(DISTINCT slot) AS count FROM attribute_metas WHERE slot IS NOT NULL"
        ),
        4,
        "the six metas fill the four number slots, each once"
    );
}
