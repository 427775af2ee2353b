//! The announcement counters (migration 25, kept by the repository: crates/postgres/src/
//! upkeep.rs) against a real database, every message written through the repositories:
//! the summed slots equal a recount after the expansion, after claims, renewals and
//! records made by several connections at once (announcement and transactional messages
//! in the same statements), after first opens and clicks, and after deletes; and
//! statements that change no count write no counter row.

use std::thread;

use diesel::{connection::SimpleConnection, pg::PgConnection, sql_query, sql_types, RunQueryDsl};
use mailroom_app::ports::{in_transaction, AudienceBatch, ClaimedMessage, Lease};
use mailroom_domain::{
    condition::Segment,
    message::{Message, MessageKind, MessageStatus, SkipReason},
    AccountId, AnnouncementId, ContactId, MessageId, TemplateId, Timestamp, Uuid,
};
use mailroom_postgres::{PgDatabase, PoolSettings};
use mailroom_test_support::TestDatabase;
use serde_json::Map;

const ACCOUNT: &str = "0190a000-0000-7000-8000-000000000001";
const ANNOUNCEMENT: &str = "0190a000-0000-7000-8000-0000000000a1";
const OTHER_ANNOUNCEMENT: &str = "0190a000-0000-7000-8000-0000000000a2";
const TEMPLATE: &str = "0190a000-0000-7000-8000-0000000000b1";
/// Each announcement's audience; the contacts after both get one transactional message.
const AUDIENCE: usize = 150;
const CONTACTS: usize = 400;

/// The account, both announcements and 400 contacts (ids rising with their number).
const FILL: &str = "
INSERT INTO accounts (id, name, created_at) VALUES ('ACCOUNT', 'a', now());
INSERT INTO announcements (account_id, id, name, template_id, subject, include_unsubscribed,
                           status, created_at, updated_at)
SELECT 'ACCOUNT', a, 'x', gen_random_uuid(), 's', false, 'running', now(), now()
FROM unnest(ARRAY['ANNOUNCEMENT', 'OTHER_ANNOUNCEMENT']::uuid[]) AS a;
INSERT INTO contacts (account_id, id, email, created_at)
SELECT 'ACCOUNT', ('0190a000-0000-7000-8000-' || lpad(g::text, 12, '0'))::uuid,
       'c' || g || '@example.org', now()
FROM generate_series(1, 400) AS g;
";

fn uuid(text: &str) -> Uuid {
    Uuid::parse_str(text).expect("uuid")
}

fn account() -> AccountId {
    AccountId::from_uuid(uuid(ACCOUNT))
}

fn contact(n: usize) -> ContactId {
    ContactId::from_uuid(uuid(&format!("0190a000-0000-7000-8000-{n:012}")))
}

/// When the messages are queued and due; claims run a little later.
fn queued_at() -> Timestamp {
    Timestamp::parse("2026-03-01T12:00:00Z").expect("timestamp")
}

fn claim_time() -> Timestamp {
    queued_at().plus(time::Duration::seconds(5))
}

fn database(db: &TestDatabase) -> PgDatabase {
    let settings = PoolSettings {
        max_size: 6,
        ..PoolSettings::default()
    };
    PgDatabase::connect(db.url(), &settings).expect("pool")
}

/// The fill, then the messages as the app writes them: each announcement's expansion
/// batch (150 contacts each, one after the other in id order), and one transactional
/// message for each of the last 100 contacts.
fn fill(conn: &mut PgConnection, database: &PgDatabase) {
    let sql = FILL
        .replace("OTHER_ANNOUNCEMENT", OTHER_ANNOUNCEMENT)
        .replace("ANNOUNCEMENT", ANNOUNCEMENT)
        .replace("ACCOUNT", ACCOUNT);
    conn.batch_execute(&sql).expect("fill");
    let segment = Segment {
        conditions: Vec::new(),
        include_unsubscribed: true,
        topic: None,
    };
    let mut after = None;
    for announcement in [ANNOUNCEMENT, OTHER_ANNOUNCEMENT] {
        let message_ids: Vec<MessageId> = (0..AUDIENCE)
            .map(|_| MessageId::from_uuid(Uuid::now_v7()))
            .collect();
        let queued = in_transaction(database, |tx| {
            Ok(tx.queue_audience_batch(&AudienceBatch {
                account: account(),
                announcement: AnnouncementId::from_uuid(uuid(announcement)),
                segment: &segment,
                created_until: Timestamp::parse("2100-01-01T00:00:00Z").expect("timestamp"),
                after,
                message_ids: &message_ids,
                template: TemplateId::from_uuid(uuid(TEMPLATE)),
                message_id_domain: "example.org",
                now: queued_at(),
            })?)
        })
        .expect("expansion batch");
        assert_eq!(queued.queued, AUDIENCE as u64);
        after = queued.last;
    }
    in_transaction(database, |tx| {
        for n in 2 * AUDIENCE + 1..=CONTACTS {
            let id = MessageId::from_uuid(Uuid::now_v7());
            tx.insert_message(
                &Message {
                    id,
                    account_id: account(),
                    contact_id: contact(n),
                    email: format!("c{n}@example.org"),
                    template_id: TemplateId::from_uuid(uuid(TEMPLATE)),
                    kind: MessageKind::Transactional,
                    status: MessageStatus::Queued,
                    skip_reason: None,
                    data: Map::new(),
                    attempts: 0,
                    next_attempt_at: Some(queued_at()),
                    last_reply: None,
                    message_id_header: format!("<{}@example.org>", id.as_uuid()),
                    created_at: queued_at(),
                    updated_at: queued_at(),
                    sent_at: None,
                    automation_id: None,
                    announcement_id: None,
                    test: false,
                    form_id: None,
                },
                None,
            )?;
        }
        Ok(())
    })
    .expect("transactional messages");
}

/// The outcome of an attempt, spread over the four by the message's id: sent, failed,
/// bounced, or queued again for a retry (due at once).
fn settled(claimed: &ClaimedMessage) -> Message {
    let mut message = claimed.message.clone();
    let at = claim_time();
    message.attempts += 1;
    message.updated_at = at;
    message.next_attempt_at = None;
    message.status = match message.id.as_uuid().as_u128() % 4 {
        0 => {
            message.sent_at = Some(at);
            MessageStatus::Sent
        }
        1 => MessageStatus::Failed,
        2 => MessageStatus::Bounced,
        _ => {
            message.next_attempt_at = Some(queued_at());
            MessageStatus::Queued
        }
    };
    message
}

#[derive(diesel::QueryableByName)]
struct Differing {
    #[diesel(sql_type = sql_types::BigInt)]
    differing: i64,
}

/// How many announcements' summed counters differ from a recount of their messages
/// (statuses, and opens and clicks when `engagement`).
fn differing(conn: &mut PgConnection, engagement: bool) -> i64 {
    let (summed, counted) = if engagement {
        (
            ", sum(opened), sum(clicked)",
            ", count(t.opened_at), count(t.clicked_at)",
        )
    } else {
        ("", "")
    };
    // Compared both ways: counters without messages, or messages without counters,
    // differ too.
    let sql = format!(
        "WITH summed AS (
             SELECT announcement_id, sum(queued) AS q, sum(sending) AS s, sum(sent) AS st,
                    sum(failed) AS f, sum(bounced) AS b, sum(skipped) AS k {summed}
             FROM announcement_counters GROUP BY 1),
         counted AS (
             SELECT m.announcement_id,
                    count(*) FILTER (WHERE message_state(m.status, m.lease_token) = 'queued'),
                    count(*) FILTER (WHERE message_state(m.status, m.lease_token) = 'sending'),
                    count(*) FILTER (WHERE message_state(m.status, m.lease_token) = 'sent'),
                    count(*) FILTER (WHERE message_state(m.status, m.lease_token) = 'failed'),
                    count(*) FILTER (WHERE message_state(m.status, m.lease_token) = 'bounced'),
                    count(*) FILTER (WHERE message_state(m.status, m.lease_token) = 'skipped') {counted}
             FROM messages m
             LEFT JOIN message_tracking t ON t.account_id = m.account_id AND t.message_id = m.id
             WHERE m.announcement_id IS NOT NULL GROUP BY 1)
         SELECT count(*) AS differing FROM (
             (SELECT * FROM summed EXCEPT SELECT * FROM counted)
             UNION ALL
             (SELECT * FROM counted EXCEPT SELECT * FROM summed)) AS d"
    );
    sql_query(sql)
        .get_result::<Differing>(conn)
        .expect("compare")
        .differing
}

#[derive(diesel::QueryableByName, PartialEq, Debug)]
struct Versions {
    #[diesel(sql_type = sql_types::Text)]
    versions: String,
}

/// The counter rows' row versions: unchanged when no statement wrote to them.
fn versions(conn: &mut PgConnection) -> Versions {
    sql_query(
        "SELECT coalesce(string_agg(ctid::text || '/' || xmin::text, ',' ORDER BY ctid), '') \
         AS versions FROM announcement_counters",
    )
    .get_result(conn)
    .expect("versions")
}

#[derive(diesel::QueryableByName)]
struct Row {
    #[diesel(sql_type = sql_types::Uuid)]
    id: Uuid,
}

/// The ids `sql` selects (a column `id`).
fn ids(conn: &mut PgConnection, sql: &str) -> Vec<Uuid> {
    sql_query(sql)
        .load::<Row>(conn)
        .expect(sql)
        .into_iter()
        .map(|row| row.id)
        .collect()
}

#[test]
fn counters_match_a_recount_after_concurrent_settles_engagement_and_deletes() {
    let db = TestDatabase::create();
    let mut conn = db.connection();
    let database = database(&db);
    fill(&mut conn, &database);
    assert_eq!(differing(&mut conn, true), 0, "after the expansion");
    let account = account();

    // Four workers claim, renew and record at once, each claim mixing both announcements'
    // messages with transactional ones, as the delivery engine's claims of one account
    // do; a record is of one message or of the rest of the claim together.
    thread::scope(|scope| {
        for worker in 0..4_u128 {
            let database = &database;
            scope.spawn(move || {
                for round in 0..6_u128 {
                    let lease = Lease {
                        token: Uuid::from_u128((worker << 64) | round | 1 << 100),
                        until: claim_time().plus(time::Duration::minutes(1)),
                    };
                    let claimed = in_transaction(database, |tx| {
                        Ok(tx.claim_due_messages(account, claim_time(), &lease, 15)?)
                    })
                    .expect("claim");
                    let ids: Vec<MessageId> = claimed.iter().map(|c| c.message.id).collect();
                    in_transaction(database, |tx| {
                        let until = claim_time().plus(time::Duration::minutes(2));
                        Ok(tx.renew_message_leases(lease.token, account, &ids, until)?)
                    })
                    .expect("renew");
                    let outcomes: Vec<Message> = claimed.iter().map(settled).collect();
                    in_transaction(database, |tx| {
                        if let Some((first, rest)) = outcomes.split_first() {
                            assert!(tx.record_message_state(first, lease.token)?);
                            let rest: Vec<&Message> = rest.iter().collect();
                            let recorded = tx.record_message_states(account, &rest, lease.token)?;
                            assert_eq!(recorded.len(), rest.len());
                        }
                        Ok(())
                    })
                    .expect("record");
                }
            });
        }
    });
    assert_eq!(
        differing(&mut conn, true),
        0,
        "after the concurrent settles"
    );

    // A claim of what is left moves counts; its renewal and the record of its
    // transactional messages change no count and write no counter row.
    let lease = Lease {
        token: Uuid::now_v7(),
        until: claim_time().plus(time::Duration::minutes(1)),
    };
    let claimed = in_transaction(&database, |tx| {
        Ok(tx.claim_due_messages(account, claim_time(), &lease, 1000)?)
    })
    .expect("claim the rest");
    assert!(claimed.iter().any(|c| c.message.announcement_id.is_some()));
    assert!(claimed.iter().any(|c| c.message.announcement_id.is_none()));
    assert_eq!(differing(&mut conn, true), 0, "after the claim");
    let before = versions(&mut conn);
    let (announced, transactional): (Vec<&ClaimedMessage>, Vec<&ClaimedMessage>) = claimed
        .iter()
        .partition(|c| c.message.announcement_id.is_some());
    let skipped: Vec<Message> = transactional
        .iter()
        .map(|c| {
            let mut message = c.message.clone();
            message.status = MessageStatus::Skipped;
            message.skip_reason = Some(SkipReason::NoMailServer);
            message.next_attempt_at = None;
            message
        })
        .collect();
    in_transaction(&database, |tx| {
        let ids: Vec<MessageId> = claimed.iter().map(|c| c.message.id).collect();
        let until = claim_time().plus(time::Duration::minutes(2));
        assert_eq!(
            tx.renew_message_leases(lease.token, account, &ids, until)?,
            ids.len() as u64
        );
        let skipped: Vec<&Message> = skipped.iter().collect();
        tx.record_message_states(account, &skipped, lease.token)?;
        Ok(())
    })
    .expect("renew, and skip the transactional ones");
    assert_eq!(versions(&mut conn), before);
    let sent: Vec<Message> = announced
        .iter()
        .map(|c| {
            let mut message = c.message.clone();
            message.status = MessageStatus::Sent;
            message.sent_at = Some(claim_time());
            message.next_attempt_at = None;
            message
        })
        .collect();
    in_transaction(&database, |tx| {
        let sent: Vec<&Message> = sent.iter().collect();
        tx.record_message_states(account, &sent, lease.token)?;
        Ok(())
    })
    .expect("send the announcement's");
    assert_eq!(differing(&mut conn, true), 0, "after the rest is settled");

    // First opens, a gained click, and a repeated click that gains nothing.
    let opened = ids(
        &mut conn,
        "SELECT id FROM messages WHERE status = 'sent' ORDER BY id LIMIT 20",
    );
    let clicked = ids(
        &mut conn,
        "SELECT id FROM messages WHERE status IN ('sent', 'failed') ORDER BY id LIMIT 30",
    );
    in_transaction(&database, |tx| {
        for id in &opened {
            assert!(tx.mark_message_opened(account, MessageId::from_uuid(*id), claim_time())?);
        }
        for id in &clicked {
            assert!(tx.mark_message_clicked(account, MessageId::from_uuid(*id), claim_time())?);
        }
        for id in &clicked {
            assert!(!tx.mark_message_clicked(account, MessageId::from_uuid(*id), claim_time())?);
        }
        Ok(())
    })
    .expect("tracking");
    assert_eq!(differing(&mut conn, true), 0, "after opens and clicks");

    // Deletes of every state (a message goes with its contact); a deleted message's opens
    // and clicks stay counted, so only states are compared from here.
    let mut gone = ids(
        &mut conn,
        "SELECT contact_id AS id FROM messages ORDER BY id DESC LIMIT 60",
    );
    gone.extend(ids(
        &mut conn,
        "SELECT contact_id AS id FROM messages WHERE status <> 'queued' ORDER BY id LIMIT 10",
    ));
    in_transaction(&database, |tx| {
        for contact in &gone {
            tx.delete_contact(account, ContactId::from_uuid(*contact))?;
        }
        Ok(())
    })
    .expect("deletes");
    assert_eq!(differing(&mut conn, false), 0, "after deletes");

    // An announcement that goes takes its counters with it; deleting its messages then
    // writes none back.
    conn.batch_execute(&format!(
        "DELETE FROM announcements WHERE id = '{OTHER_ANNOUNCEMENT}'"
    ))
    .expect("announcement deleted");
    let audience = ids(
        &mut conn,
        &format!(
            "SELECT contact_id AS id FROM messages WHERE announcement_id = '{OTHER_ANNOUNCEMENT}'"
        ),
    );
    assert!(!audience.is_empty());
    in_transaction(&database, |tx| {
        for contact in &audience {
            tx.delete_contact(account, ContactId::from_uuid(*contact))?;
        }
        Ok(())
    })
    .expect("the audience deleted");
    assert_eq!(
        differing(&mut conn, false),
        0,
        "after the announcement went"
    );
}
