//! Segment queries against a real database: the SQL the adapter compiles selects exactly the
//! contacts for which the domain's `Segment::matches` holds (docs/design.md#7-audience), in id order.
//!
//! The property test runs its cases on one database created once (creation costs ~100 ms),
//! each case on a fresh account. The accounts of earlier cases stay, so every case also
//! checks that no other account's contact leaks into the answer.

use std::cell::RefCell;

use diesel::{pg::PgConnection, prelude::*, sql_types};
use mailroom_app::ports::{in_transaction, DeliveredTo};
use mailroom_domain::{
    attribute::{AttributeSource, AttributeType, AttributeValue, ResolvedAttributes},
    condition::{
        engagement::MessageActivity, parse_conditions, AttributeTypes, Condition, ConditionInput,
        Segment,
    },
    contact::Contact,
    paging::PageRequest,
    AccountId, AnnouncementId, ContactId, MessageId, TemplateId, Timestamp, TopicId, Uuid,
};
use mailroom_postgres::{
    count_segment_with,
    schema::{accounts, contacts, messages, topic_unsubscriptions, topics},
    search_segment_with, slot_plan, PgDatabase, PoolSettings, SegmentPlan,
};
use mailroom_test_support::TestDatabase;
use proptest::{
    prelude::*,
    sample::select,
    test_runner::{Config, TestRunner},
};
use serde_json::{json, Value};

/// The attribute types of every generated account: system, then custom and event ones.
const TYPES: [(&str, AttributeType); 8] = [
    ("email", AttributeType::String),
    ("create_date", AttributeType::Date),
    ("message_count", AttributeType::Number),
    ("plan", AttributeType::String),
    ("score", AttributeType::Number),
    ("vip", AttributeType::Boolean),
    ("renewal", AttributeType::Date),
    ("event.signed_up", AttributeType::Date),
];

struct Types;

impl AttributeTypes for Types {
    fn attribute_type(&self, slug: &str) -> Option<AttributeType> {
        TYPES
            .iter()
            .find(|(name, _)| *name == slug)
            .map(|(_, t)| *t)
    }
}

/// A contact to insert. Custom attributes are `None` when the contact lacks them.
#[derive(Debug, Clone)]
struct ContactSpec {
    email: String,
    created_at: Timestamp,
    message_count: u32,
    unsubscribed: bool,
    /// Unsubscribed from the topic a segment may name.
    left_topic: bool,
    /// Unsubscribed from another topic, which must not matter.
    left_other_topic: bool,
    plan: Option<String>,
    score: Option<f64>,
    vip: Option<bool>,
    renewal: Option<Timestamp>,
    signed_up: Option<Timestamp>,
    /// The contact's messages, which engagement conditions read.
    messages: Vec<MessageSpec>,
}

/// A message to a contact: whose it is and what happened to it.
#[derive(Debug, Clone)]
struct MessageSpec {
    /// 0: transactional; 1 or 2: of announcement [`ANNOUNCEMENTS`]`[n - 1]`.
    origin: usize,
    /// Index into [`TEMPLATES`].
    template: usize,
    /// A test send, which is not the contact's message.
    test: bool,
    sent_at: Option<Timestamp>,
    bounced_at: Option<Timestamp>,
    opened_at: Option<Timestamp>,
    clicked_at: Option<Timestamp>,
}

/// The announcements and templates engagement conditions may name, the same ids in every
/// account (none of them has rows: messages reference neither table).
const ANNOUNCEMENTS: [u128; 2] = [0xa1, 0xa2];
const TEMPLATES: [u128; 2] = [0x71, 0x72];

/// The reference time of every engagement window here.
const AS_OF: &str = "2026-03-31T00:00:00.000Z";

fn as_of() -> Timestamp {
    Timestamp::parse(AS_OF).expect("reference time")
}

impl MessageSpec {
    fn announcement(&self) -> Option<AnnouncementId> {
        (self.origin > 0)
            .then(|| AnnouncementId::from_uuid(Uuid::from_u128(ANNOUNCEMENTS[self.origin - 1])))
    }

    fn template(&self) -> TemplateId {
        TemplateId::from_uuid(Uuid::from_u128(TEMPLATES[self.template]))
    }

    fn activity(&self) -> MessageActivity {
        MessageActivity {
            announcement: self.announcement(),
            template: self.template(),
            sent_at: self.sent_at,
            opened_at: self.opened_at,
            clicked_at: self.clicked_at,
            bounced_at: self.bounced_at,
        }
    }
}

impl ContactSpec {
    /// What the evaluator reads of the contact's messages: test sends left out.
    fn activity(&self) -> Vec<MessageActivity> {
        self.messages
            .iter()
            .filter(|message| !message.test)
            .map(MessageSpec::activity)
            .collect()
    }

    /// The contact's `message_count` once its sent messages are counted.
    fn counted_messages(&self) -> u32 {
        let sent = self
            .messages
            .iter()
            .filter(|message| !message.test && message.sent_at.is_some())
            .count();
        self.message_count + u32::try_from(sent).expect("few")
    }

    fn plain(email: &str, created_at: &str, message_count: u32) -> Self {
        Self {
            email: email.into(),
            created_at: Timestamp::parse(created_at).expect("test timestamp"),
            message_count,
            unsubscribed: false,
            left_topic: false,
            left_other_topic: false,
            plan: None,
            score: None,
            vip: None,
            renewal: None,
            signed_up: None,
            messages: Vec::new(),
        }
    }

    /// The custom and event attributes the contact has, as rows would hold them.
    fn custom_attributes(&self) -> Vec<(&'static str, AttributeValue)> {
        let values = [
            ("plan", self.plan.clone().map(AttributeValue::String)),
            ("score", self.score.map(AttributeValue::Number)),
            ("vip", self.vip.map(AttributeValue::Boolean)),
            ("renewal", self.renewal.map(AttributeValue::Date)),
            ("event.signed_up", self.signed_up.map(AttributeValue::Date)),
        ];
        values
            .into_iter()
            .filter_map(|(slug, value)| Some((slug, value?)))
            .collect()
    }
}

/// A generated account's contents and the segments asked of it.
#[derive(Debug, Clone)]
struct Scenario {
    contacts: Vec<ContactSpec>,
    segments: Vec<SegmentSpec>,
}

/// A segment before the account (and so its topic) exists.
#[derive(Debug, Clone)]
struct SegmentSpec {
    conditions: Vec<ConditionInput>,
    include_unsubscribed: bool,
    by_topic: bool,
}

/// One database, a direct connection for inserts, and the adapter under test.
struct Fixture {
    // Kept for its Drop, which removes the database.
    _db: TestDatabase,
    conn: PgConnection,
    database: PgDatabase,
}

/// An inserted account: its id, the topic a segment may name, and its contacts with their
/// resolved attributes (same order).
struct Account {
    id: AccountId,
    topic: TopicId,
    contacts: Vec<Contact>,
    attributes: Vec<ResolvedAttributes>,
    /// Each contact's messages, in contact order, with the ids they were stored under.
    messages: Vec<Vec<(MessageId, MessageSpec)>>,
}

impl Fixture {
    fn new() -> Self {
        let db = TestDatabase::create();
        let conn = db.connection();
        let settings = PoolSettings {
            max_size: 2,
            ..PoolSettings::default()
        };
        let database = PgDatabase::connect(db.url(), &settings).expect("pool");
        Self {
            _db: db,
            conn,
            database,
        }
    }

    /// Inserts a fresh account with two topics and `specs` as its contacts, in one
    /// transaction (one commit, not one per row, keeps a case fast on a busy disk), then
    /// their metas and attribute values through the repository, in another.
    fn account(&mut self, specs: &[ContactSpec]) -> Account {
        let account = self
            .conn
            .transaction(|conn| Ok::<_, diesel::result::Error>(insert_account(conn, specs)))
            .expect("account transaction");
        write_attributes(&self.database, &account, specs);
        write_engagement(&self.database, &account);
        account
    }

    fn search(&self, account: AccountId, segment: &Segment, page: PageRequest) -> Vec<ContactId> {
        in_transaction(&self.database, |tx| {
            Ok(tx.search_segment(account, segment, page, None)?)
        })
        .expect("search")
    }

    fn count(&self, account: AccountId, segment: &Segment) -> u64 {
        in_transaction(&self.database, |tx| Ok(tx.count_segment(account, segment)?)).expect("count")
    }

    /// The slots plan of `segment`, when every condition's slug has a slot.
    fn slot_plan(&mut self, account: AccountId, segment: &Segment) -> Option<SegmentPlan> {
        slot_plan(&mut self.conn, account, segment).expect("slot lookup")
    }

    /// Every contact of the segment (search) and their count with `plan`, in one
    /// transaction like the repository's.
    fn with_plan(
        &mut self,
        account: AccountId,
        segment: &Segment,
        plan: &SegmentPlan,
    ) -> (Vec<ContactId>, u64) {
        self.conn
            .transaction(|conn| {
                let found = search_segment_with(conn, account, segment, ALL_PAGE, None, plan)
                    .expect("search with a plan");
                let count =
                    count_segment_with(conn, account, segment, plan).expect("count with a plan");
                // Keyset pages of two, each after the last id of the one before, must
                // walk the same contacts as one offset page.
                let mut walked: Vec<ContactId> = Vec::new();
                loop {
                    let page = PageRequest { start: 0, limit: 2 };
                    let after = walked.last().copied();
                    let next = search_segment_with(conn, account, segment, page, after, plan)
                        .expect("keyset page with a plan");
                    if next.is_empty() {
                        break;
                    }
                    walked.extend(next);
                    assert!(walked.len() <= found.len(), "keyset paging does not end");
                }
                assert_eq!(walked, found, "keyset pages with {plan:?}");
                Ok::<_, diesel::result::Error>((found, count))
            })
            .expect("plan transaction")
    }
}

/// The plans a segment admits: the general one always; driven by each condition and the
/// intersection when every condition is answered by attribute rows alone (a custom or
/// event attribute, any operator but `not_exists`).
fn plans_of(segment: &Segment) -> Vec<SegmentPlan> {
    let mut plans = vec![SegmentPlan::General];
    let rows_only = !segment.conditions.is_empty()
        && segment.conditions.iter().all(|condition| {
            !["email", "create_date", "message_count"].contains(&condition.slug())
                && !matches!(
                    condition,
                    Condition::NotExists { .. } | Condition::Engagement(_)
                )
        });
    if rows_only {
        let n = segment.conditions.len();
        plans.extend((0..n).map(|driver| SegmentPlan::Driven { driver }));
        plans.push(SegmentPlan::Intersection {
            order: (0..n).rev().collect(),
        });
    }
    plans
}

/// The inserts behind [`Fixture::account`].
fn insert_account(conn: &mut PgConnection, specs: &[ContactSpec]) -> Account {
    let now = time::OffsetDateTime::now_utc();
    let account = Uuid::now_v7();
    let (topic, other_topic) = (Uuid::now_v7(), Uuid::now_v7());
    diesel::insert_into(accounts::table)
        .values((
            accounts::id.eq(account),
            accounts::name.eq("segments"),
            accounts::created_at.eq(now),
        ))
        .execute(conn)
        .expect("account");
    for (id, name) in [(topic, "news"), (other_topic, "offers")] {
        diesel::insert_into(topics::table)
            .values((
                topics::account_id.eq(account),
                topics::id.eq(id),
                topics::name.eq(name),
                topics::created_at.eq(now),
            ))
            .execute(conn)
            .expect("topic");
    }
    // The announcements engagement conditions name: an open of one of their messages
    // counts in their counters, which reference them.
    for id in ANNOUNCEMENTS {
        diesel::sql_query(
            "INSERT INTO announcements (account_id, id, name, template_id, subject, \
             include_unsubscribed, attributes, status, audience_size, created_at, updated_at) \
             VALUES ($1, $2, 'news', $3, 'News', true, '[]', 'running', 0, now(), now())",
        )
        .bind::<sql_types::Uuid, _>(account)
        .bind::<sql_types::Uuid, _>(Uuid::from_u128(id))
        .bind::<sql_types::Uuid, _>(Uuid::from_u128(TEMPLATES[0]))
        .execute(conn)
        .expect("announcement");
    }
    let mut inserted = Account {
        id: AccountId::from_uuid(account),
        topic: TopicId::from_uuid(topic),
        contacts: Vec::new(),
        attributes: Vec::new(),
        messages: Vec::new(),
    };
    for (index, spec) in specs.iter().enumerate() {
        let id = contact_id(index);
        let unsubscribed_at = spec.unsubscribed.then_some(now);
        diesel::insert_into(contacts::table)
            .values((
                contacts::account_id.eq(account),
                contacts::id.eq(id),
                contacts::email.eq(&spec.email),
                contacts::created_at.eq(spec.created_at.as_datetime()),
                contacts::unsubscribed_at.eq(unsubscribed_at),
                contacts::message_count.eq(i32::try_from(spec.message_count).expect("small")),
            ))
            .execute(conn)
            .expect("contact");
        let mut left = Vec::new();
        for (is_left, topic_id) in [
            (spec.left_topic, topic),
            (spec.left_other_topic, other_topic),
        ] {
            if is_left {
                diesel::insert_into(topic_unsubscriptions::table)
                    .values((
                        topic_unsubscriptions::account_id.eq(account),
                        topic_unsubscriptions::contact_id.eq(id),
                        topic_unsubscriptions::topic_id.eq(topic_id),
                        topic_unsubscriptions::created_at.eq(now),
                    ))
                    .execute(conn)
                    .expect("topic unsubscription");
                left.push(TopicId::from_uuid(topic_id));
            }
        }
        let contact = Contact {
            id: ContactId::from_uuid(id),
            email: spec.email.clone(),
            created_at: spec.created_at,
            hard_bounced_at: None,
            complaint_at: None,
            unsubscribed_at: unsubscribed_at.map(Timestamp::from_datetime),
            topic_unsubscriptions: left,
            message_count: spec.counted_messages(),
            pending_since: None,
            confirmed_at: None,
        };
        inserted.attributes.push(resolved(&contact, spec));
        inserted.contacts.push(contact);
        inserted
            .messages
            .push(insert_messages(conn, account, id, spec));
    }
    inserted
}

/// The contact's messages as rows, in their final state; what their delivery and
/// tracking wrote besides is left to [`write_engagement`].
fn insert_messages(
    conn: &mut PgConnection,
    account: Uuid,
    contact: Uuid,
    spec: &ContactSpec,
) -> Vec<(MessageId, MessageSpec)> {
    let created = Timestamp::parse("2025-01-01T00:00:00Z").expect("time");
    let mut stored = Vec::new();
    for message in &spec.messages {
        let id = Uuid::now_v7();
        // A sent message that bounced later is stored sent: its bounce is reported later
        // (`write_engagement`). One that bounced at delivery is stored bounced.
        let (status, updated_at, next_attempt_at) = match (message.sent_at, message.bounced_at) {
            (Some(sent), _) => ("sent", sent, None),
            (None, Some(bounced)) => ("bounced", bounced, None),
            (None, None) => ("queued", created, Some(created.as_datetime())),
        };
        let kind = if message.origin > 0 {
            "announcement"
        } else {
            "transactional"
        };
        diesel::insert_into(messages::table)
            .values((
                messages::account_id.eq(account),
                messages::id.eq(id),
                messages::contact_id.eq(contact),
                messages::email.eq(&spec.email),
                messages::template_id.eq(message.template().as_uuid()),
                messages::kind.eq(kind),
                messages::status.eq(status),
                messages::data.eq(json!({})),
                messages::next_attempt_at.eq(next_attempt_at),
                messages::message_id_header.eq(format!("<{id}@example.com>")),
                messages::created_at.eq(created.as_datetime()),
                messages::updated_at.eq(updated_at.as_datetime()),
                messages::sent_at.eq(message.sent_at.map(|at| at.as_datetime())),
                messages::announcement_id.eq(message.announcement().map(|id| id.as_uuid())),
                messages::test.eq(message.test),
            ))
            .execute(conn)
            .expect("message");
        stored.push((MessageId::from_uuid(id), message.clone()));
    }
    stored
}

/// What delivery, bounce reports and tracking write besides the message rows, through the
/// repository: each real message's delivery outcome counted at its time, a late bounce
/// reported at its time, then every first open and click marked at its time (a test
/// send's too, which must leave the contact alone).
fn write_engagement(database: &PgDatabase, account: &Account) {
    in_transaction(database, |tx| {
        for (contact, messages) in account.contacts.iter().zip(&account.messages) {
            for (id, message) in messages {
                let delivered = |sent: u32, bounced: bool| DeliveredTo {
                    account: account.id,
                    contact: contact.id,
                    sent,
                    bounced,
                };
                // Delivery counts a real message's outcome (a test send's it leaves out);
                // a later report turns a sent message bounced.
                if !message.test {
                    if let Some(sent) = message.sent_at {
                        tx.count_messages_to_contacts(&[delivered(1, false)], sent)?;
                    } else if let Some(bounced) = message.bounced_at {
                        tx.count_messages_to_contacts(&[delivered(0, true)], bounced)?;
                    }
                }
                if let (Some(_), Some(bounced)) = (message.sent_at, message.bounced_at) {
                    tx.mark_sent_message_bounced(account.id, *id, "550 5.1.1 gone", bounced)?;
                }
                if let Some(at) = message.opened_at {
                    tx.mark_message_opened(account.id, *id, at)?;
                }
                if let Some(at) = message.clicked_at {
                    tx.mark_message_clicked(account.id, *id, at)?;
                }
            }
        }
        Ok(())
    })
    .expect("engagement");
}

/// The metas and attribute values of `account`'s contacts, written through the
/// repository. The custom metas take their slots (migration 31) as they are created: two
/// before the values (which are then copied into the slots as they are written), two
/// after (the values they find are copied when they take their slot); the event date
/// takes none.
fn write_attributes(database: &PgDatabase, account: &Account, specs: &[ContactSpec]) {
    let now = Timestamp::from_datetime(time::OffsetDateTime::now_utc());
    in_transaction(database, |tx| {
        tx.ensure_attribute_metas(account.id, &metas(&["plan", "score"]), now)?;
        for (contact, spec) in account.contacts.iter().zip(specs) {
            let values: Vec<(String, AttributeValue)> = spec
                .custom_attributes()
                .into_iter()
                .map(|(slug, value)| (slug.to_owned(), value))
                .collect();
            if !values.is_empty() {
                tx.set_attributes(account.id, contact.id, &values)?;
            }
        }
        tx.ensure_attribute_metas(
            account.id,
            &metas(&["vip", "renewal", "event.signed_up"]),
            now,
        )?;
        Ok(())
    })
    .expect("attributes");
}

/// The metas of `slugs`, of their [`TYPES`] type.
fn metas(slugs: &[&str]) -> Vec<(String, AttributeType, AttributeSource)> {
    slugs
        .iter()
        .map(|slug| {
            let kind = Types.attribute_type(slug).expect("a test slug");
            let source = if slug.starts_with("event.") {
                AttributeSource::Event
            } else {
                AttributeSource::Custom
            };
            ((*slug).to_owned(), kind, source)
        })
        .collect()
}

/// The resolved attributes of a contact, system ones included, as a resolver would build
/// them.
fn resolved(contact: &Contact, spec: &ContactSpec) -> ResolvedAttributes {
    let mut attributes: ResolvedAttributes = spec
        .custom_attributes()
        .into_iter()
        .map(|(slug, value)| (slug.to_owned(), value))
        .collect();
    attributes.insert(
        "email".into(),
        AttributeValue::String(contact.email.clone()),
    );
    attributes.insert(
        "create_date".into(),
        AttributeValue::Date(contact.created_at),
    );
    attributes.insert(
        "message_count".into(),
        AttributeValue::Number(f64::from(contact.message_count)),
    );
    attributes
}

/// Distinct ids whose order is not the insertion order: the index times an odd constant is
/// a bijection on u128.
fn contact_id(index: usize) -> Uuid {
    let index = u128::try_from(index).expect("small index") + 1;
    Uuid::from_u128(index.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))
}

const ALL_PAGE: PageRequest = PageRequest {
    start: 0,
    limit: 100,
};

fn input(slug: &str, operator: &str, value: Value) -> ConditionInput {
    ConditionInput {
        slug: slug.into(),
        operator: operator.into(),
        value: Some(value),
    }
}

fn segment(conditions: &[ConditionInput]) -> Segment {
    Segment {
        conditions: parse_conditions(conditions, &Types, as_of()).expect("valid conditions"),
        include_unsubscribed: true,
        topic: None,
    }
}

// ---- generators ----

/// Stored strings and string operands share one small pool of case variants, substrings
/// and two Latin-1 letters, so equal-ignoring-case and substring relations are frequent.
const TEXTS: [&str; 12] = [
    "", "a", "A", "b", "ab", "AB", "Ab", "é", "É", "aé", "AÉ", "bÉa",
];

/// Email local parts (the contact's index is appended) and domains, in case variants.
const LOCALS: [&str; 5] = ["a", "A", "é", "É", "ab"];
const DOMAINS: [&str; 4] = ["Example.com", "example.COM", "élan.org", "ÉLAN.org"];

fn text() -> impl Strategy<Value = String> {
    select(&TEXTS[..]).prop_map(str::to_owned)
}

fn number() -> impl Strategy<Value = f64> {
    select(&[-1.5, 0.0, 1.0, 2.0, 2.5, 3.0, 10.0][..])
}

/// Instants at and around the midnights of a few neighbouring days.
fn instant() -> impl Strategy<Value = Timestamp> {
    let days = &["2026-02-28", "2026-03-01", "2026-03-02"][..];
    let times = &[
        "00:00:00.000",
        "00:00:00.001",
        "12:00:00.000",
        "23:59:59.999",
    ][..];
    (select(days), select(times))
        .prop_map(|(day, time)| Timestamp::parse(&format!("{day}T{time}Z")).expect("instant"))
}

/// Date operands in both accepted forms; the offsets cross midnight in either direction.
fn date_operand() -> impl Strategy<Value = Value> {
    let days = &["2026-02-28", "2026-03-01", "2026-03-02"][..];
    let forms = &[
        "",
        "T12:00:00Z",
        "T00:30:00+02:00",
        "T23:30:00-02:00",
        "T23:59:59.999Z",
    ][..];
    (select(days), select(forms)).prop_map(|(day, form)| json!(format!("{day}{form}")))
}

/// Instants on both sides of the engagement windows' starts (1, 7 and 30 days before
/// [`AS_OF`]) and one long before.
fn engagement_instant() -> impl Strategy<Value = Timestamp> {
    select(
        &[
            "2026-03-30T00:00:00.000Z",
            "2026-03-29T23:59:59.999Z",
            "2026-03-24T00:00:00.000Z",
            "2026-03-23T23:59:59.999Z",
            "2026-03-01T00:00:00.000Z",
            "2026-02-28T23:59:59.999Z",
            "2025-06-01T00:00:00.000Z",
        ][..],
    )
    .prop_map(|at| Timestamp::parse(at).expect("instant"))
}

fn message_spec() -> impl Strategy<Value = MessageSpec> {
    (
        0..3usize,
        0..2usize,
        prop::bool::weighted(0.2),
        prop::option::weighted(0.7, engagement_instant()),
        prop::option::weighted(0.25, engagement_instant()),
        prop::option::weighted(0.4, engagement_instant()),
        prop::option::weighted(0.3, engagement_instant()),
    )
        .prop_map(
            |(origin, template, test, sent_at, bounced_at, opened_at, clicked_at)| MessageSpec {
                origin,
                template,
                test,
                sent_at,
                bounced_at,
                opened_at,
                clicked_at,
            },
        )
}

/// At most one message per announcement and contact, as the store keeps them: a second
/// one of the same announcement becomes transactional.
fn one_per_announcement(mut messages: Vec<MessageSpec>) -> Vec<MessageSpec> {
    let mut seen = [false; 2];
    for message in &mut messages {
        if message.origin > 0 {
            if seen[message.origin - 1] {
                message.origin = 0;
            } else {
                seen[message.origin - 1] = true;
            }
        }
    }
    messages
}

fn contact_spec() -> impl Strategy<Value = ContactSpec> {
    let email = (select(&LOCALS[..]), select(&DOMAINS[..]));
    let status = (
        0..5u32,
        prop::bool::weighted(0.25),
        prop::bool::weighted(0.25),
        prop::bool::weighted(0.25),
    );
    let custom = (
        prop::option::weighted(0.7, text()),
        prop::option::weighted(0.7, number()),
        prop::option::weighted(0.7, any::<bool>()),
        prop::option::weighted(0.7, instant()),
        prop::option::weighted(0.7, instant()),
    );
    let messages = prop::collection::vec(message_spec(), 0..=3).prop_map(one_per_announcement);
    (email, instant(), status, custom, messages).prop_map(
        |(
            (local, domain),
            created_at,
            (message_count, unsubscribed, left_topic, left_other_topic),
            (plan, score, vip, renewal, signed_up),
            messages,
        )| ContactSpec {
            // The index is appended when the account is built, for uniqueness.
            email: format!("{local}@{domain}"),
            created_at,
            message_count,
            unsubscribed,
            left_topic,
            left_other_topic,
            plan,
            score,
            vip,
            renewal,
            signed_up,
            messages,
        },
    )
}

/// Any condition valid for [`TYPES`], its operand often equal to a stored value.
fn condition() -> impl Strategy<Value = ConditionInput> {
    let slugs: Vec<&'static str> = TYPES.iter().map(|(slug, _)| *slug).collect();
    let number_operators = &[
        "n_equal",
        "n_not_equal",
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
    ][..];
    let date_operators = &["after", "before", "d_equal", "d_not_equal"][..];
    let string_operators = &["s_equal", "s_not_equal", "contains", "not_contains"][..];
    let email_operands = prop_oneof![
        // Often the whole address of contact 0, 1 or 2, in another case.
        (select(&LOCALS[..]), 0..3usize, select(&DOMAINS[..]))
            .prop_map(|(local, index, domain)| format!("{local}{index}@{domain}")),
        select(
            &[
                "example",
                "EXAMPLE.com",
                "@élan.ORG",
                "é",
                "É",
                "A",
                "",
                "1@",
                // LIKE's metacharacters match literally (contains is a LIKE pattern).
                "e_ample",
                "%",
                "_",
                "\\"
            ][..]
        )
        .prop_map(str::to_owned),
    ];
    prop_oneof![
        (select(slugs), select(&["exists", "not_exists"][..])).prop_map(|(slug, op)| input(
            slug,
            op,
            json!("")
        )),
        select(&["true", "false"][..]).prop_map(|op| input("vip", op, json!(""))),
        (
            select(&["score", "message_count"][..]),
            select(number_operators),
            number()
        )
            .prop_map(|(slug, op, n)| input(slug, op, json!(n))),
        (
            select(&["renewal", "event.signed_up", "create_date"][..]),
            select(date_operators),
            date_operand()
        )
            .prop_map(|(slug, op, day)| input(slug, op, day)),
        (select(string_operators), text()).prop_map(|(op, value)| input("plan", op, json!(value))),
        (select(string_operators), email_operands).prop_map(|(op, value)| input(
            "email",
            op,
            json!(value)
        )),
        engagement_condition(),
    ]
}

/// An engagement condition on any message, or on one of [`ANNOUNCEMENTS`] or
/// [`TEMPLATES`] (or an announcement no message belongs to).
fn engagement_condition() -> impl Strategy<Value = ConditionInput> {
    let slugs = &[
        "engagement.sent",
        "engagement.opened",
        "engagement.clicked",
        "engagement.bounced",
    ][..];
    let days = select(&[1u16, 7, 30][..]);
    let window = prop_oneof![
        days.clone().prop_map(|days| json!(days)),
        (days.clone(), select(&[0xa1u128, 0xa2, 0xa9][..])).prop_map(|(days, id)| json!({
            "days": days,
            "announcementId": Uuid::from_u128(id).to_string()
        })),
        (days, select(&TEMPLATES[..])).prop_map(|(days, id)| json!({
            "days": days,
            "templateId": Uuid::from_u128(id).to_string()
        })),
    ];
    (
        select(slugs),
        select(&["within_days", "not_within_days"][..]),
        window,
    )
        .prop_map(|(slug, op, window)| input(slug, op, window))
}

/// Mostly one or two conditions: three random ones rarely leave anyone to compare.
fn segment_spec() -> impl Strategy<Value = SegmentSpec> {
    let conditions = prop_oneof![
        1 => prop::collection::vec(condition(), 0..=0),
        5 => prop::collection::vec(condition(), 1..=1),
        3 => prop::collection::vec(condition(), 2..=2),
        1 => prop::collection::vec(condition(), 3..=3),
    ];
    (conditions, any::<bool>(), prop::bool::weighted(0.3)).prop_map(
        |(conditions, include_unsubscribed, by_topic)| SegmentSpec {
            conditions,
            include_unsubscribed,
            by_topic,
        },
    )
}

/// Several segments per account: an account costs a dozen inserts, a segment two queries.
fn scenario() -> impl Strategy<Value = Scenario> {
    (
        prop::collection::vec(contact_spec(), 1..=12),
        prop::collection::vec(segment_spec(), 1..=8),
    )
        .prop_map(|(mut contacts, segments)| {
            for (index, contact) in contacts.iter_mut().enumerate() {
                contact.email = contact.email.replacen('@', &format!("{index}@"), 1);
            }
            Scenario { contacts, segments }
        })
}

/// The comparison of non-ASCII letters ignoring case needs `lower()` to know them, which
/// the database's LC_CTYPE decides; under `C` it lowers ASCII only.
fn require_unicode_lower(conn: &mut PgConnection) {
    #[derive(QueryableByName)]
    struct Row {
        #[diesel(sql_type = sql_types::Bool)]
        lowers_latin_1: bool,
    }
    let row: Row = diesel::sql_query("SELECT lower('ÉÀÞ') = 'éàþ' AS lowers_latin_1")
        .get_result(conn)
        .expect("lower() probe");
    assert!(
        row.lowers_latin_1,
        "this database's lower() leaves 'É' as is (LC_CTYPE is probably C): case-insensitive \
         conditions on non-ASCII letters need a Unicode-aware ctype such as C.UTF-8"
    );
}

#[test]
fn sql_selects_the_contacts_the_domain_matches() {
    let fixture = RefCell::new(Fixture::new());
    require_unicode_lower(&mut fixture.borrow_mut().conn);
    let config = Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let outcome = runner.run(&scenario(), |scenario| {
        let account = fixture.borrow_mut().account(&scenario.contacts);
        for spec in &scenario.segments {
            let segment = Segment {
                conditions: parse_conditions(&spec.conditions, &Types, as_of())
                    .map_err(|e| TestCaseError::fail(e.summary()))?,
                include_unsubscribed: spec.include_unsubscribed,
                topic: spec.by_topic.then_some(account.topic),
            };
            let mut expected: Vec<ContactId> = account
                .contacts
                .iter()
                .zip(&account.attributes)
                .zip(&scenario.contacts)
                .filter(|((contact, attributes), spec)| {
                    segment.matches(contact, attributes, &spec.activity())
                })
                .map(|((contact, _), _)| contact.id)
                .collect();
            expected.sort();
            let found = fixture.borrow().search(account.id, &segment, ALL_PAGE);
            prop_assert_eq!(&found, &expected, "search of {:?}", segment);
            let count = fixture.borrow().count(account.id, &segment);
            prop_assert_eq!(count, expected.len() as u64, "count of {:?}", segment);
            // The repository picks one plan by the sets' sizes (all small here); every
            // plan the segment admits must give the same answer.
            let mut plans = plans_of(&segment);
            // Every custom slug of the scenario has a slot (event dates take none), so a
            // segment of custom attributes only, none of them `not_exists`, must be
            // countable from the slots.
            let slots = fixture.borrow_mut().slot_plan(account.id, &segment);
            let custom_only = segment.conditions.iter().all(|condition| {
                !["email", "create_date", "message_count", "event.signed_up"]
                    .contains(&condition.slug())
                    && !matches!(
                        condition,
                        Condition::NotExists { .. } | Condition::Engagement(_)
                    )
            });
            prop_assert_eq!(
                slots.is_some(),
                custom_only && !segment.conditions.is_empty(),
                "slot plan of {:?}",
                segment
            );
            plans.extend(slots);
            for plan in plans {
                let (found, count) = fixture.borrow_mut().with_plan(account.id, &segment, &plan);
                prop_assert_eq!(&found, &expected, "search with {:?} of {:?}", plan, segment);
                prop_assert_eq!(count, expected.len() as u64, "count with {:?}", plan);
            }
        }
        Ok(())
    });
    if let Err(error) = outcome {
        panic!("{error}");
    }
}

#[test]
fn system_attributes_compile_to_contact_columns() {
    let mut fixture = Fixture::new();
    let account = fixture.account(&[
        ContactSpec::plain("Alice@Example.com", "2026-03-01T23:59:59.999Z", 5),
        ContactSpec::plain("bob@other.org", "2026-03-02T00:00:00.000Z", 1),
        ContactSpec::plain("carol@EXAMPLE.org", "2026-02-27T12:00:00.000Z", 3),
    ]);
    let [alice, bob, carol] = [0, 1, 2].map(|i| account.contacts[i].id);
    let sorted = |mut ids: Vec<ContactId>| {
        ids.sort();
        ids
    };
    let cases = [
        (
            vec![input("email", "contains", json!("EXAMPLE"))],
            vec![alice, carol],
        ),
        (
            vec![input("email", "s_equal", json!("ALICE@example.COM"))],
            vec![alice],
        ),
        (
            vec![input("create_date", "after", json!("2026-03-01"))],
            vec![bob],
        ),
        (
            vec![input(
                "create_date",
                "d_equal",
                json!("2026-03-02T01:00:00+02:00"),
            )],
            vec![alice],
        ),
        (
            vec![input("message_count", "greater_than", json!(2))],
            vec![alice, carol],
        ),
        (
            vec![input("message_count", "greater_than", json!(4.5))],
            vec![alice],
        ),
        (
            vec![
                input("email", "not_contains", json!("alice")),
                input("create_date", "before", json!("2026-03-01")),
            ],
            vec![carol],
        ),
        (
            vec![input("email", "exists", json!(""))],
            vec![alice, bob, carol],
        ),
        (
            vec![input("message_count", "not_exists", json!(""))],
            vec![],
        ),
    ];
    for (conditions, expected) in cases {
        let segment = segment(&conditions);
        let expected = sorted(expected);
        for (contact, attributes) in account.contacts.iter().zip(&account.attributes) {
            assert_eq!(
                segment.matches(contact, attributes, &[]),
                expected.contains(&contact.id),
                "domain: {conditions:?}"
            );
        }
        assert_eq!(
            fixture.search(account.id, &segment, ALL_PAGE),
            expected,
            "{conditions:?}"
        );
        assert_eq!(
            fixture.count(account.id, &segment),
            expected.len() as u64,
            "{conditions:?}"
        );
    }
}

#[test]
fn pages_follow_id_order_and_end_empty() {
    let mut fixture = Fixture::new();
    let specs: Vec<ContactSpec> = (0..5)
        .map(|i| ContactSpec::plain(&format!("c{i}@example.com"), "2026-03-01T00:00:00Z", i))
        .collect();
    let account = fixture.account(&specs);
    // Another account with the same contacts must not show.
    fixture.account(&specs);
    let mut all: Vec<ContactId> = account.contacts.iter().map(|c| c.id).collect();
    all.sort();
    let everyone = Segment::default();
    let page = |start: u64, limit: u32| {
        fixture.search(account.id, &everyone, PageRequest { start, limit })
    };
    assert_eq!(page(0, 100), all);
    assert_eq!(page(0, 2), all[..2]);
    assert_eq!(page(2, 2), all[2..4]);
    assert_eq!(page(4, 2), all[4..]);
    assert!(page(5, 2).is_empty());
    assert!(page(1000, 100).is_empty());
    assert!(page(i64::MAX as u64, 100).is_empty());
    assert_eq!(fixture.count(account.id, &everyone), 5);
    let unknown = AccountId::from_uuid(Uuid::now_v7());
    assert!(fixture.search(unknown, &everyone, ALL_PAGE).is_empty());
    assert_eq!(fixture.count(unknown, &everyone), 0);
}
