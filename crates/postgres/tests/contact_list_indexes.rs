//! The contact list's status sort and "bounced" filter are served by migration 15's
//! indexes (docs/console.md, "Page times"). PostgreSQL uses an expression index only for
//! the very expression it was built on, so the sort's expression is read from the
//! adapter's source, as the adapter sends it: a change on one side only fails here.
//!
//! The email filter's plans (a capped count through the trigram index picks one) give
//! the plain statement's pages, a rare needle is read through the trigram index even
//! when the column's statistics make it look common, and so is a rare two-character one;
//! a rare one-character needle is read through the character index (docs/console.md,
//! "Short needles").

use diesel::{
    connection::SimpleConnection, sql_query, sql_types::Text, QueryableByName, RunQueryDsl,
};
use mailroom_app::ports::in_transaction;
use mailroom_domain::{
    contact::{ContactQuery, ContactSort, StatusFilter},
    paging::PageRequest,
    AccountId, ContactId, Uuid,
};
use mailroom_postgres::{
    explain_contact_search, list_contact_ids_with, ContactSearchPlan, PgDatabase, PoolSettings,
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

/// The email filter's two plans (docs/console.md, "The email filter's plan") and the
/// list through the repository give, for every sort, direction, status filter and page,
/// the contacts of the plain statement (`strpos`, sorted, no index in mind): the same
/// contacts in the same order. Needles include LIKE's metacharacters, upper case, short
/// ones (one character, looked up in the character index: rare and common letters and
/// digits, non-ASCII, punctuation, LIKE's metacharacters; two letters or digits, looked up
/// as a pair, rare and common, at a word's end, before punctuation, next to non-ASCII
/// characters, digits; two with punctuation or non-ASCII, not looked up), one that no
/// contact contains and one that every contact contains.
#[test]
fn email_filter_plans_give_the_plain_statements_pages() {
    let database = TestDatabase::create();
    let mut conn = database.connection();
    for (account, contacts) in [(ACCOUNT, 3000), (OTHER_ACCOUNT, 400)] {
        conn.batch_execute(&format!(
            "INSERT INTO accounts (id, name, created_at) VALUES ('{account}', 'a', now());
             INSERT INTO contacts (account_id, id, email, created_at, hard_bounced_at,
                                   complaint_at, unsubscribed_at, message_count, sort_name)
               SELECT '{account}', gen_random_uuid(),
                      'C' || g || CASE WHEN g % 11 = 0 THEN '_x' WHEN g % 13 = 0 THEN '%y'
                                       WHEN g % 17 = 0 THEN E'\\\\z'
                                       -- `zq` at a word's end, before punctuation, before
                                       -- and after non-ASCII letters, before a digit
                                       WHEN g % 97 = 0 THEN 'zq'
                                       WHEN g % 89 = 0
                                         THEN 'zq' || (ARRAY['.', '-', '+', '_'])[g % 4 + 1] || 'q'
                                       WHEN g % 83 = 0 THEN 'zqü'
                                       WHEN g % 79 = 0 THEN 'Üzq'
                                       WHEN g % 73 = 0 THEN 'zq9'
                                       WHEN g % 71 = 0 THEN 'zqÉ.q'
                                       ELSE '' END
                          || '@' || CASE WHEN g % 37 = 0 THEN 'Bücher.example'
                                         WHEN g % 41 = 0 THEN 'zqü.example'
                                         ELSE (ARRAY['example.org', 'Mail.example.com', 'ex.net'])[g % 3 + 1] END,
                      timestamptz '2026-11-01' - (g % 100) * interval '1 minute',
                      CASE WHEN g % 10 = 0 THEN now() END,
                      CASE WHEN g % 8 = 0 THEN now() END,
                      CASE WHEN g % 9 = 0 THEN now() END,
                      g % 7,
                      CASE WHEN g % 3 <> 0 THEN 'n' || (g % 50) END
               FROM generate_series(1, {contacts}) g;"
        ))
        .expect("contacts");
    }
    conn.batch_execute("ANALYZE contacts").expect("analyze");
    let pool = PgDatabase::connect(database.url(), &PoolSettings::default()).expect("pool");
    let account = AccountId::from_uuid(ACCOUNT.parse().expect("uuid"));
    let sorts = [
        ContactSort::CreateDate,
        ContactSort::Email,
        ContactSort::MessageCount,
        ContactSort::Name,
        ContactSort::Status,
    ];
    let needles = [
        "c42",
        "C1",
        "example",
        "zq",
        "_x",
        "%y",
        "\\z",
        "c2999@",
        "@ex",
        "c",
        "xample.c",
        "C1500@Example.org",
        "0_x@ex",
        "x@ex",
        "c2_x@mail.ex",
        "ZQ",
        "zq9",
        "q9",
        "Q.",
        "qü",
        "üz",
        "ch",
        "er",
        "ex",
        "90",
        "7@",
        "ü",
        "Ü",
        "É",
        "z",
        "Z",
        "q",
        "9",
        "%",
        "_",
        "\\",
        ".",
        "@",
        "j",
    ];
    let pages = [(0, 50), (17, 25), (2900, 100)];
    let mut compared = 0;
    for needle in needles {
        for sort in sorts {
            for ascending in [true, false] {
                for status in [
                    None,
                    Some(StatusFilter::Bounced),
                    Some(StatusFilter::Unsubscribed),
                ] {
                    let query = ContactQuery {
                        sort,
                        ascending,
                        search: Some(needle.to_owned()),
                        email: None,
                        status,
                    };
                    for (start, limit) in pages {
                        let page = PageRequest { start, limit };
                        let plain = plain_page(&mut conn, &query, page);
                        for plan in [ContactSearchPlan::Trigram, ContactSearchPlan::Walk] {
                            let ids = list_contact_ids_with(&mut conn, account, &query, page, plan)
                                .expect("page");
                            assert_eq!(ids, plain, "{plan:?} {query:?} {page:?}");
                        }
                        let listed: Vec<ContactId> =
                            in_transaction(
                                &pool,
                                |tx| Ok(tx.list_contacts(account, &query, page)?),
                            )
                            .expect("list")
                            .into_iter()
                            .map(|contact| contact.id)
                            .collect();
                        assert_eq!(listed, plain, "{query:?} {page:?}");
                        compared += usize::from(!plain.is_empty());
                    }
                }
            }
        }
    }
    // The needles are not all misses: most pages hold contacts.
    assert!(compared > 400, "{compared}");
}

const OTHER_ACCOUNT: &str = "01a00000-0000-7000-8000-00000000dcba";

#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
}

/// The page as the plain statement answers it, written here independently of the adapter.
fn plain_page(
    conn: &mut diesel::PgConnection,
    query: &ContactQuery,
    page: PageRequest,
) -> Vec<ContactId> {
    let status = match query.status {
        Some(StatusFilter::Bounced) => " AND hard_bounced_at IS NOT NULL",
        Some(StatusFilter::Unsubscribed) => " AND unsubscribed_at IS NOT NULL",
        None => "",
    };
    let key = match query.sort {
        ContactSort::CreateDate => "created_at",
        ContactSort::Email => "email_lower",
        ContactSort::MessageCount => "message_count",
        ContactSort::Name => "sort_name",
        ContactSort::Status => {
            "CASE WHEN hard_bounced_at IS NOT NULL THEN 3 WHEN complaint_at IS NOT NULL \
             THEN 2 WHEN unsubscribed_at IS NOT NULL THEN 1 ELSE 0 END"
        }
    };
    let direction = if query.ascending { "ASC" } else { "DESC" };
    sql_query(format!(
        "SELECT id FROM contacts WHERE account_id = '{ACCOUNT}' \
         AND strpos(email_lower, lower($1)) > 0{status} \
         ORDER BY {key} {direction} NULLS LAST, id {direction} OFFSET $2 LIMIT $3"
    ))
    .bind::<Text, _>(query.search.clone().unwrap_or_default())
    .bind::<diesel::sql_types::BigInt, _>(i64::try_from(page.start).expect("start"))
    .bind::<diesel::sql_types::BigInt, _>(i64::from(page.limit))
    .load::<IdRow>(conn)
    .expect("plain page")
    .into_iter()
    .map(|row| ContactId::from_uuid(row.id))
    .collect()
}

#[derive(QueryableByName)]
struct ReadRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    read: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    index_scans: i64,
}

/// Index entries and rows of `contacts` read by scans other than the trigram index's, and
/// the trigram index's scans, as the statistics collector has them.
fn contact_reads(conn: &mut diesel::PgConnection) -> (i64, i64) {
    reads_outside(conn, "contacts_email_trgm_idx")
}

/// Index entries and rows of `contacts` read by scans other than `index`'s, and `index`'s
/// scans, as the statistics collector has them.
fn reads_outside(conn: &mut diesel::PgConnection, index: &str) -> (i64, i64) {
    let row = sql_query(
        "SELECT (SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes \
                 WHERE relname = 'contacts' AND indexrelname <> $1)::bigint \
              + (SELECT coalesce(seq_tup_read, 0) FROM pg_stat_user_tables \
                 WHERE relname = 'contacts')::bigint AS read, \
                (SELECT idx_scan FROM pg_stat_user_indexes \
                 WHERE indexrelname = $1) AS index_scans",
    )
    .bind::<Text, _>(index)
    .get_result::<ReadRow>(conn)
    .expect("statistics");
    (row.read, row.index_scans)
}

/// A rare needle that the column's histogram happens to contain (an address taken from
/// it) is estimated at 1 % of the contacts; the planner then walks the sort index with the
/// filter and reads every contact when only one matches (docs/console.md, "The email
/// filter's plan"). The list must read it through the trigram index whatever the
/// statistics say: the test checks that the premise holds (the plain statement's plan
/// walks), then that the list through the repository reads almost nothing else.
#[test]
fn a_rare_needle_in_the_statistics_is_read_through_the_trigram_index() {
    let database = TestDatabase::create();
    let mut conn = database.connection();
    let pool = database.pool_of_one();
    // Enough contacts that PostgreSQL reads a rare needle's few through the trigram index
    // rather than reading them all (with 20,000 it scans the table, which is as cheap).
    // The trigram index is built after the insert (as migration 26 builds it), which is
    // several times faster than maintaining it row by row.
    conn.batch_execute(&format!(
        "INSERT INTO accounts (id, name, created_at) VALUES ('{ACCOUNT}', 'a', now());
         DROP INDEX contacts_email_trgm_idx;
         INSERT INTO contacts (account_id, id, email, created_at)
           SELECT '{ACCOUNT}', gen_random_uuid(), 'c' || g || '@example.org', now()
           FROM generate_series(1, 100000) g;
         CREATE INDEX contacts_email_trgm_idx ON contacts USING gin (email_lower gin_trgm_ops);
         ANALYZE contacts;"
    ))
    .expect("contacts");
    let needle = sql_query(
        "SELECT (histogram_bounds::text::text[])[50] AS \"QUERY PLAN\" FROM pg_stats \
         WHERE tablename = 'contacts' AND attname = 'email_lower'",
    )
    .get_result::<PlanLine>(&mut conn)
    .expect("a histogram of email_lower")
    .line;
    let walked = plan_as_is(
        &mut conn,
        &format!(
            "SELECT id FROM contacts WHERE account_id = '{ACCOUNT}' \
             AND email_lower LIKE '%{needle}%' ORDER BY sort_name NULLS LAST, id LIMIT 50"
        ),
    );
    assert!(
        walked.contains("Index Scan using contacts_sort_name_idx"),
        "the premise: the planner walks the sort index for {needle}\n{walked}"
    );

    let account = AccountId::from_uuid(ACCOUNT.parse().expect("uuid"));
    let query = ContactQuery {
        search: Some(needle.to_uppercase()),
        ..ContactQuery::default()
    };
    let (read_before, scans_before) = contact_reads(&mut conn);
    let listed = in_transaction(&pool, |tx| {
        Ok(tx.list_contacts(
            account,
            &query,
            PageRequest {
                start: 0,
                limit: 50,
            },
        )?)
    })
    .expect("list");
    assert_eq!(
        listed
            .iter()
            .map(|contact| contact.email.as_str())
            .collect::<Vec<_>>(),
        [needle.as_str()]
    );
    let (read, scans) = reads_since(
        &mut conn,
        "contacts_email_trgm_idx",
        (read_before, scans_before),
    );
    // The planner's own plan read all 100,000 contacts through the sort index.
    assert!(
        scans > 0,
        "the trigram index was not read ({read} other reads)"
    );
    // The list checks the first 5,000 contacts in its order first (a common needle's page
    // is there), then at most 5,000 index entries to learn whether those were all the
    // account's, then counts and reads through the trigram index.
    assert!(
        read <= 10_100,
        "{read} index entries or rows read outside the trigram index"
    );
}

/// [`plan`] without switching anything off: the plan the planner picks on its own.
fn plan_as_is(conn: &mut diesel::PgConnection, statement: &str) -> String {
    let lines: Vec<PlanLine> = sql_query(format!("EXPLAIN {statement}"))
        .load(conn)
        .expect("explain");
    lines
        .into_iter()
        .map(|line| line.line)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A rare two-character needle of letters or digits (`zq`) is looked up as a pair: the
/// trigrams that begin with it in the trigram index, and the addresses with characters
/// outside printable ASCII in migration 32's partial index (docs/console.md, "Short
/// needles"). The plain statement reads the account's contacts for it; the list's count
/// and read are planned on those two indexes alone, find every match (at a word's end,
/// before punctuation, a digit or a non-ASCII letter, in the domain) and none of another
/// account, and the list reads at most the first 5,000 contacts besides. A pair common in
/// the column's statistics is not looked up.
#[test]
fn a_rare_two_character_needle_is_read_through_the_trigram_index() {
    let database = TestDatabase::create();
    let mut conn = database.connection();
    let pool = database.pool_of_one();
    conn.batch_execute(&format!(
        "INSERT INTO accounts (id, name, created_at)
           VALUES ('{ACCOUNT}', 'a', now()), ('{OTHER_ACCOUNT}', 'b', now());
         DROP INDEX contacts_email_trgm_idx;
         INSERT INTO contacts (account_id, id, email, created_at)
           SELECT '{ACCOUNT}', gen_random_uuid(), 'c' || g || '@example.org', now()
           FROM generate_series(1, 100000) g;
         INSERT INTO contacts (account_id, id, email, created_at)
           SELECT '{ACCOUNT}', gen_random_uuid(), email, now()
           FROM unnest(ARRAY['zq@example.org', 'a.ZQ@example.org', 'b-zq-c@example.org',
                             'b+zq_c@example.org', 'zq9@example.org', 'x@zqü.example',
                             'üzq@example.org', 'c@bücher.example', 'z.q@example.org',
                             'qz@example.org', 'z@q.example']) email;
         INSERT INTO contacts (account_id, id, email, created_at)
           SELECT '{OTHER_ACCOUNT}', gen_random_uuid(), email, now()
           FROM unnest(ARRAY['zq@example.org', 'y@zqü.example']) email;
         CREATE INDEX contacts_email_trgm_idx ON contacts USING gin (email_lower gin_trgm_ops);
         ANALYZE contacts;"
    ))
    .expect("contacts");
    let walked = plan_as_is(
        &mut conn,
        &format!(
            "SELECT id FROM contacts WHERE account_id = '{ACCOUNT}' \
             AND email_lower LIKE '%zq%' ORDER BY sort_name NULLS LAST, id LIMIT 50"
        ),
    );
    assert!(
        !walked.contains("contacts_email_trgm_idx"),
        "the premise: the plain statement reads the account's contacts\n{walked}"
    );

    let account = AccountId::from_uuid(ACCOUNT.parse().expect("uuid"));
    let query = ContactQuery {
        search: Some("ZQ".to_owned()),
        ..ContactQuery::default()
    };
    let page = PageRequest {
        start: 0,
        limit: 50,
    };
    let plans = explain_contact_search(&mut conn, account, &query, page)
        .expect("explain")
        .expect("zq is looked up");
    for plan in plans {
        assert!(
            plan.contains("Bitmap Index Scan on contacts_email_trgm_idx")
                && plan.contains("Bitmap Index Scan on contacts_email_outside_ascii_idx"),
            "{plan}"
        );
        assert!(
            !plan.contains("Seq Scan") && !plan.contains("Index Scan using"),
            "{plan}"
        );
        assert!(!plan.contains("Index Only Scan"), "{plan}");
    }

    let expected = plain_page(&mut conn, &query, page);
    let (read_before, scans_before) = reads_settled(&mut conn);
    let listed =
        in_transaction(&pool, |tx| Ok(tx.list_contacts(account, &query, page)?)).expect("list");
    let mut emails: Vec<&str> = listed
        .iter()
        .map(|contact| contact.email.as_str())
        .collect();
    emails.sort_unstable();
    assert_eq!(
        emails,
        [
            "a.ZQ@example.org",
            "b+zq_c@example.org",
            "b-zq-c@example.org",
            "x@zqü.example",
            "zq9@example.org",
            "zq@example.org",
            "üzq@example.org",
        ]
    );
    assert_eq!(
        listed.iter().map(|contact| contact.id).collect::<Vec<_>>(),
        expected
    );
    let (read, scans) = reads_since(
        &mut conn,
        "contacts_email_trgm_idx",
        (read_before, scans_before),
    );
    assert!(
        scans > 0,
        "the trigram index was not read ({read} other reads)"
    );
    // The first 5,000 contacts in the list's order, at most 5,000 index entries to learn
    // that they are not all the account's, and the partial index's few entries (twice:
    // the count and the read).
    assert!(
        read <= 10_100,
        "{read} index entries or rows read outside the trigram index"
    );

    // A pair that many addresses contain (`c1`: 11 %) is not looked up even where the
    // first 5,000 contacts hold none of it (by email, descending: c99999 …): its trigrams'
    // entries are most of the table's. The column's statistics say it is common, and the
    // list keeps the planner's choice, as before.
    let sampled = sql_query(
        "SELECT count(*)::text AS \"QUERY PLAN\" FROM pg_stats, \
         unnest(histogram_bounds::text::text[]) bound \
         WHERE tablename = 'contacts' AND attname = 'email_lower' AND strpos(bound, 'c1') > 0",
    )
    .get_result::<PlanLine>(&mut conn)
    .expect("histogram")
    .line;
    assert!(
        sampled.parse::<u32>().expect("a count") >= 5,
        "the premise: c1 is common in the statistics ({sampled} sampled addresses)"
    );
    let query = ContactQuery {
        sort: ContactSort::Email,
        ascending: false,
        search: Some("C1".to_owned()),
        ..ContactQuery::default()
    };
    let expected = plain_page(&mut conn, &query, page);
    let (read_before, scans_before) = reads_settled(&mut conn);
    let listed =
        in_transaction(&pool, |tx| Ok(tx.list_contacts(account, &query, page)?)).expect("list");
    assert_eq!(
        listed.iter().map(|contact| contact.id).collect::<Vec<_>>(),
        expected
    );
    assert_eq!(listed.len(), 50);
    let (read, scans) = reads_since(
        &mut conn,
        "contacts_email_trgm_idx",
        (read_before, scans_before),
    );
    assert!(read > 5_000, "the walk was not read ({read})");
    assert_eq!(scans, 0, "c1 was looked up in the trigram index");
}

/// [`contact_reads`] once this connection's own reads (the plain statement's, read to
/// compare) are in: a backend sends its statistics when it goes idle, at once if it last
/// sent them more than a second before, so the reads that follow are the list's alone.
fn reads_settled(conn: &mut diesel::PgConnection) -> (i64, i64) {
    reads_settled_outside(conn, "contacts_email_trgm_idx")
}

/// [`reads_settled`] for [`reads_outside`] `index`.
fn reads_settled_outside(conn: &mut diesel::PgConnection, index: &str) -> (i64, i64) {
    std::thread::sleep(std::time::Duration::from_millis(1100));
    conn.batch_execute("SELECT 1").expect("idle");
    std::thread::sleep(std::time::Duration::from_millis(100));
    reads_outside(conn, index)
}

/// The reads of [`reads_outside`] `index` since `before`, once they show up (at most 10 s).
fn reads_since(conn: &mut diesel::PgConnection, index: &str, before: (i64, i64)) -> (i64, i64) {
    let (mut read, mut scans) = (0, 0);
    for _ in 0..100 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let (read_now, scans_now) = reads_outside(conn, index);
        (read, scans) = (read_now - before.0, scans_now - before.1);
        if read > 0 || scans > 0 {
            break;
        }
    }
    (read, scans)
}

const CHARS_INDEX: &str = "contacts_email_chars_idx";

/// A rare one-character needle (`z`, `ü`) is looked up in migration 33's character index
/// (docs/console.md, "Short needles"): the plain statement reads the account's contacts
/// for it; the list's count and read are planned on that index alone, find every match
/// (in the local part or the domain, any case, a non-ASCII letter) and none of another
/// account, and the list reads at most the first 5,000 contacts besides. A character
/// common in the column's statistics is not looked up, even where the first 5,000
/// contacts in the list's order hold none of it and fewer than 20,000 contacts do.
#[test]
fn a_rare_one_character_needle_is_read_through_the_character_index() {
    let database = TestDatabase::create();
    let mut conn = database.connection();
    let pool = database.pool_of_one();
    // `k` in 18,000 of the first 90,000 contacts by creation, none of the last 10,000.
    conn.batch_execute(&format!(
        "INSERT INTO accounts (id, name, created_at)
           VALUES ('{ACCOUNT}', 'a', now()), ('{OTHER_ACCOUNT}', 'b', now());
         DROP INDEX contacts_email_trgm_idx;
         DROP INDEX {CHARS_INDEX};
         INSERT INTO contacts (account_id, id, email, created_at)
           SELECT '{ACCOUNT}', gen_random_uuid(),
                  'c' || g || CASE WHEN g % 5 = 0 AND g <= 90000 THEN 'k' ELSE '' END
                    || '@example.org',
                  timestamptz '2026-11-01' + g * interval '1 second'
           FROM generate_series(1, 100000) g;
         INSERT INTO contacts (account_id, id, email, created_at)
           SELECT '{ACCOUNT}', gen_random_uuid(), email, now()
           FROM unnest(ARRAY['z@example.org', 'a.Z@example.org', 'b@z.example',
                             'x@zü.example', 'Üy@example.org', 'c@bücher.example']) email;
         INSERT INTO contacts (account_id, id, email, created_at)
           SELECT '{OTHER_ACCOUNT}', gen_random_uuid(), email, now()
           FROM unnest(ARRAY['z@example.org', 'y@ü.example']) email;
         CREATE INDEX contacts_email_trgm_idx ON contacts USING gin (email_lower gin_trgm_ops);
         CREATE INDEX {CHARS_INDEX} ON contacts USING gin (string_to_array(email_lower, NULL));
         ANALYZE contacts;"
    ))
    .expect("contacts");
    let account = AccountId::from_uuid(ACCOUNT.parse().expect("uuid"));
    let page = PageRequest {
        start: 0,
        limit: 50,
    };
    for (needle, found) in [
        (
            "Z",
            &[
                "a.Z@example.org",
                "b@z.example",
                "x@zü.example",
                "z@example.org",
            ][..],
        ),
        (
            "ü",
            &["c@bücher.example", "x@zü.example", "Üy@example.org"][..],
        ),
    ] {
        let walked = plan_as_is(
            &mut conn,
            &format!(
                "SELECT id FROM contacts WHERE account_id = '{ACCOUNT}' \
                 AND email_lower LIKE '%{}%' ORDER BY sort_name NULLS LAST, id LIMIT 50",
                needle.to_lowercase()
            ),
        );
        assert!(
            !walked.contains(CHARS_INDEX),
            "the premise: the plain statement reads the account's contacts\n{walked}"
        );
        let query = ContactQuery {
            search: Some(needle.to_owned()),
            ..ContactQuery::default()
        };
        let plans = explain_contact_search(&mut conn, account, &query, page)
            .expect("explain")
            .expect("one character is looked up");
        for plan in plans {
            assert!(
                plan.contains(&format!("Bitmap Index Scan on {CHARS_INDEX}")),
                "{needle}: {plan}"
            );
            assert!(
                !plan.contains("Seq Scan")
                    && !plan.contains("Index Scan using")
                    && !plan.contains("Index Only Scan")
                    && !plan.contains("contacts_email_trgm_idx"),
                "{needle}: {plan}"
            );
        }

        let expected = plain_page(&mut conn, &query, page);
        let before = reads_settled_outside(&mut conn, CHARS_INDEX);
        let listed =
            in_transaction(&pool, |tx| Ok(tx.list_contacts(account, &query, page)?)).expect("list");
        let mut emails: Vec<&str> = listed
            .iter()
            .map(|contact| contact.email.as_str())
            .collect();
        emails.sort_unstable();
        assert_eq!(emails, found, "{needle}");
        assert_eq!(
            listed.iter().map(|contact| contact.id).collect::<Vec<_>>(),
            expected,
            "{needle}"
        );
        let (read, scans) = reads_since(&mut conn, CHARS_INDEX, before);
        assert!(
            scans > 0,
            "{needle}: the character index was not read ({read} other reads)"
        );
        // The first 5,000 contacts in the list's order and at most 5,000 index entries to
        // learn that they are not all the account's.
        assert!(
            read <= 10_100,
            "{needle}: {read} index entries or rows read outside the character index"
        );
    }

    // `k` (18 %, newest first: the first 5,000 hold none) is not looked up, though its
    // 18,000 contacts are fewer than the count's cap: the statistics say it is common,
    // and the list keeps the planner's choice.
    let query = ContactQuery {
        sort: ContactSort::CreateDate,
        ascending: false,
        search: Some("K".to_owned()),
        ..ContactQuery::default()
    };
    let expected = plain_page(&mut conn, &query, page);
    assert_eq!(expected.len(), 50);
    let before = reads_settled_outside(&mut conn, CHARS_INDEX);
    let listed =
        in_transaction(&pool, |tx| Ok(tx.list_contacts(account, &query, page)?)).expect("list");
    assert_eq!(
        listed.iter().map(|contact| contact.id).collect::<Vec<_>>(),
        expected
    );
    let (read, scans) = reads_since(&mut conn, CHARS_INDEX, before);
    assert!(read > 5_000, "the walk was not read ({read})");
    assert_eq!(scans, 0, "k was looked up in the character index");
}
