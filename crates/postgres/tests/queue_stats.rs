//! The `/metrics` snapshot against a real database: exact counts on a small table, and on
//! a large one exact pending counts with planner estimates for the final statuses.

use diesel::connection::SimpleConnection;
use mailroom_app::ports::{in_transaction, QueueStats};
use mailroom_domain::{message::MessageStatus, Timestamp};
use mailroom_postgres::{PgDatabase, PoolSettings};
use mailroom_test_support::TestDatabase;

/// Inserts `total` messages: every 50th queued (due a second ago), every 10th other one
/// failed, the rest sent.
const FILL: &str = "
INSERT INTO accounts (id, name, created_at) VALUES ('0190a000-0000-7000-8000-000000000001', 'a', now());
INSERT INTO contacts (account_id, id, email, created_at)
VALUES ('0190a000-0000-7000-8000-000000000001', '0190a000-0000-7000-8000-000000000002', 'a@example.com', now());
INSERT INTO messages (account_id, id, contact_id, email, template_id, kind, status,
                      next_attempt_at, message_id_header, created_at, updated_at, sent_at)
SELECT '0190a000-0000-7000-8000-000000000001', s.mid,
       '0190a000-0000-7000-8000-000000000002', 'a@example.com',
       '0190a000-0000-7000-8000-000000000003', 'transactional',
       CASE WHEN g % 50 = 0 THEN 'queued' WHEN g % 10 = 0 THEN 'failed' ELSE 'sent' END,
       CASE WHEN g % 50 = 0 THEN now() - interval '1 second' END,
       '<' || s.mid || '@x>', now(), now(),
       CASE WHEN g % 10 <> 0 THEN now() END
FROM (SELECT g, gen_random_uuid() AS mid FROM generate_series(1, TOTAL) AS g) AS s;
ANALYZE messages;
";

fn snapshot(total: u32) -> QueueStats {
    let db = TestDatabase::create();
    db.connection()
        .batch_execute(&FILL.replace("TOTAL", &total.to_string()))
        .expect("fill");
    let database = PgDatabase::connect(db.url(), &PoolSettings::default()).expect("pool");
    let now = Timestamp::from_datetime(time::OffsetDateTime::now_utc());
    in_transaction(&database, |tx| Ok(tx.queue_stats(now)?)).expect("stats")
}

fn count(stats: &QueueStats, status: MessageStatus) -> u64 {
    stats
        .messages_by_status
        .iter()
        .find(|(s, _)| *s == status)
        .map(|(_, n)| *n)
        .expect("every status is present")
}

#[test]
fn a_small_table_is_counted_exactly() {
    let stats = snapshot(1_000);
    assert!(stats.message_counts_exact);
    assert_eq!(count(&stats, MessageStatus::Queued), 20);
    assert_eq!(count(&stats, MessageStatus::Failed), 80);
    assert_eq!(count(&stats, MessageStatus::Sent), 900);
    assert_eq!(count(&stats, MessageStatus::Bounced), 0);
    assert_eq!(stats.messages.pending, 20);
    assert_eq!(stats.messages.due, 20);
    assert!(stats.messages.oldest_due_age_secs >= 1.0);
    assert_eq!(stats.webhook_events.pending, 0);
}

#[test]
fn a_large_table_counts_pending_rows_and_estimates_the_rest() {
    let stats = snapshot(120_000);
    assert!(
        !stats.message_counts_exact,
        "120,000 rows are past the exact limit"
    );
    assert_eq!(
        count(&stats, MessageStatus::Queued),
        2_400,
        "pending rows stay exact"
    );
    assert_eq!(count(&stats, MessageStatus::Sending), 0);
    assert_eq!(stats.messages.due, 2_400);
    let within = |status, expected: f64, tolerance: f64| {
        #[allow(clippy::cast_precision_loss)]
        let estimate = count(&stats, status) as f64;
        assert!(
            (estimate - expected).abs() <= expected * tolerance,
            "{status:?}: estimate {estimate}, actual {expected}"
        );
    };
    within(MessageStatus::Sent, 108_000.0, 0.05);
    within(MessageStatus::Failed, 9_600.0, 0.25);
    assert_eq!(count(&stats, MessageStatus::Bounced), 0);
}
