//! The contact list's status sort and "bounced" filter are served by migration 15's
//! indexes (docs/console.md, "Page times"). PostgreSQL uses an expression index only for
//! the very expression it was built on, so the sort's expression is read from the
//! adapter's source, as the adapter sends it: a change on one side only fails here.

use diesel::{
    connection::SimpleConnection, sql_query, sql_types::Text, QueryableByName, RunQueryDsl,
};
use mailroom_test_support::TestDatabase;

const CONTACTS_RS: &str = include_str!("../src/repositories/contacts.rs");
const ACCOUNT: &str = "01a00000-0000-7000-8000-00000000abcd";

#[derive(QueryableByName)]
struct PlanLine {
    #[diesel(sql_type = Text, column_name = "QUERY PLAN")]
    line: String,
}

/// The adapter's `STATUS_RANK` string literal, with Rust's `\`-newline continuations
/// (which drop the newline and the next line's indentation) applied.
fn status_rank() -> String {
    let start = CONTACTS_RS
        .find("const STATUS_RANK: &str = \"")
        .expect("STATUS_RANK in contacts.rs")
        + "const STATUS_RANK: &str = \"".len();
    let literal = &CONTACTS_RS[start..];
    let literal = &literal[..literal.find("\";").expect("end of STATUS_RANK")];
    let mut text = String::new();
    let mut lines = literal.split("\\\n");
    text.push_str(lines.next().unwrap_or_default());
    for line in lines {
        text.push_str(line.trim_start());
    }
    text
}

/// The plan of `statement` with scans and sorts the planner would rather avoid switched
/// off: if an index can serve it, the plan names it.
fn plan(conn: &mut diesel::PgConnection, statement: &str) -> String {
    conn.batch_execute(
        "SET enable_seqscan = off; SET enable_sort = off; SET enable_bitmapscan = off",
    )
    .expect("settings");
    let lines: Vec<PlanLine> = sql_query(format!("EXPLAIN {statement}"))
        .load(conn)
        .expect("explain");
    lines
        .into_iter()
        .map(|line| line.line)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn status_sort_and_bounced_filter_read_their_indexes() {
    let database = TestDatabase::create();
    let mut conn = database.connection();
    conn.batch_execute(&format!(
        "INSERT INTO accounts (id, name, created_at) VALUES ('{ACCOUNT}', 'a', now());
         INSERT INTO contacts (account_id, id, email, created_at, hard_bounced_at)
           SELECT '{ACCOUNT}', gen_random_uuid(), 'c' || g || '@example.org', now(),
                  CASE WHEN g % 100 = 0 THEN now() END
           FROM generate_series(1, 2000) g;
         ANALYZE contacts;"
    ))
    .expect("contacts");
    let rank = status_rank();
    assert!(
        rank.starts_with("CASE WHEN hard_bounced_at IS NOT NULL THEN 3 WHEN"),
        "{rank}"
    );
    for order in ["", " DESC"] {
        let sorted = plan(
            &mut conn,
            &format!(
                "SELECT id FROM contacts WHERE account_id = '{ACCOUNT}' \
                 ORDER BY {rank}{order}, id{order} LIMIT 50"
            ),
        );
        assert!(sorted.contains("contacts_status_rank_idx"), "{sorted}");
        assert!(!sorted.contains("Sort"), "{sorted}");
    }
    let bounced = plan(
        &mut conn,
        &format!(
            "SELECT id FROM contacts WHERE account_id = '{ACCOUNT}' \
             AND contacts.hard_bounced_at IS NOT NULL ORDER BY id LIMIT 50"
        ),
    );
    assert!(bounced.contains("contacts_bounced_idx"), "{bounced}");
}
