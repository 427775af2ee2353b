//! The announcement expansion's batch statement (`queue_audience_batch`) on a filled
//! account: every batch, the first and the last alike, walks the contacts in id order from
//! where the previous one stopped and probes each contact's conditions through the primary
//! key of `contact_attributes`; none reads a condition's whole set into a hash table or
//! sorts. The planner, left to choose, read the whole set (500,000 ids at 1,000,000
//! contacts) in later batches, hashed or walked from its start: per-batch cost grew with
//! the batch's position (docs/operations.md, "Delivery engine").

use diesel::connection::SimpleConnection;
use mailroom_app::ports::AudienceBatch;
use mailroom_domain::{
    attribute::AttributeType,
    condition::{parse_conditions, AttributeTypes, ConditionInput, Segment},
    AccountId, AnnouncementId, ContactId, MessageId, TemplateId, Timestamp, Uuid,
};
use mailroom_postgres::explain_audience_batch;
use mailroom_test_support::TestDatabase;
use serde_json::json;

const ACCOUNT: &str = "0190a000-0000-7000-8000-000000000001";
/// Contacts of the account; their ids rise with creation, as UUIDv7 ids do.
const CONTACTS: u32 = 20_000;

/// `CONTACTS` contacts, every other one with `plan = pro`, the rest `free`.
const FILL: &str = "
INSERT INTO accounts (id, name, created_at) VALUES ('ACCOUNT', 'a', now());
INSERT INTO contacts (account_id, id, email, created_at)
SELECT 'ACCOUNT', ('01a00000-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid,
       'c' || g || '@example.org', now() - interval '1 day'
FROM generate_series(1, CONTACTS) AS g;
INSERT INTO attribute_metas (account_id, slug, attribute_type, source, created_at)
VALUES ('ACCOUNT', 'plan', 'string', 'custom', now());
INSERT INTO contact_attributes (account_id, contact_id, slug, string_value)
SELECT account_id, id, 'plan',
       CASE WHEN split_part(substr(email, 2), '@', 1)::bigint % 2 = 0 THEN 'pro' ELSE 'free' END
FROM contacts;
ANALYZE;
";

struct Types;

impl AttributeTypes for Types {
    fn attribute_type(&self, slug: &str) -> Option<AttributeType> {
        (slug == "plan").then_some(AttributeType::String)
    }
}

fn contact(n: u32) -> ContactId {
    ContactId::from_uuid(
        Uuid::parse_str(&format!("01a00000-0000-7000-8000-{n:012x}")).expect("contact id"),
    )
}

#[test]
fn every_batch_walks_contacts_in_id_order_and_probes_its_conditions() {
    let database = TestDatabase::create();
    let mut conn = database.connection();
    conn.batch_execute(
        &FILL
            .replace("ACCOUNT", ACCOUNT)
            .replace("CONTACTS", &CONTACTS.to_string()),
    )
    .expect("fill");
    let segment = Segment {
        conditions: parse_conditions(
            &[ConditionInput {
                slug: "plan".into(),
                operator: "s_equal".into(),
                value: Some(json!("pro")),
            }],
            &Types,
            Timestamp::parse("2026-11-28T12:00:00Z").expect("timestamp"),
        )
        .expect("condition"),
        include_unsubscribed: false,
        topic: None,
    };
    let message_ids: Vec<MessageId> = (0..5_000)
        .map(|_| MessageId::from_uuid(Uuid::now_v7()))
        .collect();
    // The first batch, one in the middle, and the last ones (fewer contacts left than a
    // batch takes): the positions where the planner's own choice changed.
    for after in [
        None,
        Some(CONTACTS / 2),
        Some(CONTACTS * 4 / 5),
        Some(CONTACTS - 100),
    ] {
        let batch = AudienceBatch {
            account: AccountId::from_uuid(Uuid::parse_str(ACCOUNT).expect("account")),
            announcement: AnnouncementId::from_uuid(Uuid::now_v7()),
            segment: &segment,
            created_until: Timestamp::parse("2100-01-01T00:00:00Z").expect("timestamp"),
            after: after.map(contact),
            message_ids: &message_ids,
            template: TemplateId::from_uuid(Uuid::now_v7()),
            message_id_domain: "example.org",
            now: Timestamp::parse("2026-11-28T12:00:00Z").expect("timestamp"),
        };
        let plan = explain_audience_batch(&mut conn, &batch)
            .expect("explain")
            .join("\n");
        // The reading of the contacts: the plan of the `audience` CTE, up to the insert
        // (whose join with the batch's message ids may hash: it is one batch long).
        let audience = plan
            .split("CTE inserted")
            .next()
            .and_then(|head| head.split("CTE audience").nth(1))
            .expect("the audience CTE in the plan");
        assert!(
            audience.contains("Index Scan using contacts_pkey on contacts"),
            "after {after:?}: contacts in id order from the last one\n{plan}"
        );
        assert!(
            audience.contains("Index Scan using contact_attributes_pkey on contact_attributes"),
            "after {after:?}: the condition probed per contact\n{plan}"
        );
        assert!(
            !audience.contains("Hash") && !audience.contains("Sort"),
            "after {after:?}: no set read whole into a hash table, nothing sorted\n{plan}"
        );
        // The settings that hold the walk must not push the statement's cost over
        // `jit_above_cost`: compiling it took about a second per batch.
        assert!(
            !plan.contains("JIT"),
            "after {after:?}: no JIT compilation\n{plan}"
        );
    }
}
