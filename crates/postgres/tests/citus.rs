//! The schema on Citus (`cargo xtask test --citus`): every table placed, the distributed
//! schema equal to the plain one table by table, and the conversion idempotent. Off
//! Citus only the placement rule runs (every table of the plain schema has one).

use std::collections::BTreeMap;

use diesel::{
    connection::SimpleConnection, pg::PgConnection, sql_query, sql_types::Text, Connection,
    QueryableByName, RunQueryDsl,
};
use mailroom_postgres::{
    citus::{self, Placement},
    migration_statements, run_migrations, run_migrations_through, url_with_database,
};
use mailroom_test_support::{admin_url, on_citus, TestDatabase};

#[derive(QueryableByName, Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Line {
    #[diesel(sql_type = Text)]
    table_name: String,
    #[diesel(sql_type = Text)]
    line: String,
}

/// The tables of the public schema and whether each has an `account_id` (of a plain
/// database: on a Citus coordinator the reference tables' shards would mix in).
fn tables(conn: &mut PgConnection) -> Vec<(String, bool)> {
    sql_query(
        "SELECT c.relname::text AS table_name, \
                (EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid \
                         AND a.attname = 'account_id' AND NOT a.attisdropped))::text AS line \
         FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r' \
         ORDER BY 1",
    )
    .load::<Line>(conn)
    .expect("listing tables")
    .into_iter()
    .map(|row| (row.table_name, row.line == "true"))
    .collect()
}

#[test]
fn every_table_of_the_schema_has_a_placement_on_citus() {
    if on_citus() {
        // The plain schema is what this checks; on Citus the shards' names would mix in.
        return;
    }
    let database = TestDatabase::create();
    let unplaced: Vec<String> = tables(&mut database.connection())
        .into_iter()
        .filter(|(name, has_account_id)| citus::placement(name, *has_account_id).is_none())
        .map(|(name, _)| name)
        .collect();
    assert!(
        unplaced.is_empty(),
        "tables neither account-owned, reference nor local (crates/postgres/src/citus.rs): {unplaced:?}"
    );
}

/// Columns, constraints and indexes of `tables`, one line each, by table.
fn shape(conn: &mut PgConnection, tables: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut lines: Vec<Line> = sql_query(
        "SELECT table_name::text, \
                format('column %s %s %s default %s', column_name, data_type, \
                       is_nullable, coalesce(column_default, '-')) AS line \
         FROM information_schema.columns \
         WHERE table_schema = 'public' AND table_name = ANY($1) \
         UNION ALL \
         SELECT conrelid::regclass::text, \
                format('constraint %s %s', conname, pg_get_constraintdef(oid)) \
         FROM pg_constraint \
         WHERE connamespace = 'public'::regnamespace AND conrelid::regclass::text = ANY($1) \
         UNION ALL \
         SELECT tablename::text, format('index %s', indexdef) FROM pg_indexes \
         WHERE schemaname = 'public' AND tablename = ANY($1)",
    )
    .bind::<diesel::sql_types::Array<Text>, _>(tables)
    .load(conn)
    .expect("reading the schema");
    lines.sort();
    let mut by_table: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in lines {
        by_table.entry(line.table_name).or_default().push(line.line);
    }
    by_table
}

/// Asserts that the distributed database `cluster` (named `name`) has the schema the
/// migrations make on plain PostgreSQL, table by table, and every table placed as
/// [`citus::placement`] says.
fn assert_equals_the_plain_schema(cluster: &mut PgConnection, name: &str) {
    // The plain schema: the same migrations in a database of the coordinator that has no
    // Citus extension (nothing is distributed there).
    let plain_name = format!("{name}_plain");
    let admin = admin_url();
    PgConnection::establish(&admin)
        .expect("coordinator")
        .batch_execute(&format!("CREATE DATABASE \"{plain_name}\""))
        .expect("creating the plain database");
    let plain_url = url_with_database(&admin, &plain_name).expect("plain URL");
    run_migrations(&plain_url).expect("migrating the plain database");
    let mut plain = PgConnection::establish(&plain_url).expect("plain database");

    let plain_tables = tables(&mut plain);
    let names: Vec<String> = plain_tables.iter().map(|(name, _)| name.clone()).collect();
    let plain_shape = shape(&mut plain, &names);
    let mut cluster_shape = shape(cluster, &names);
    drop(plain);
    PgConnection::establish(&admin)
        .expect("coordinator")
        .batch_execute(&format!("DROP DATABASE \"{plain_name}\" WITH (FORCE)"))
        .expect("dropping the plain database");

    // The one intended difference: the lanes' foreign keys to accounts, which Citus
    // refuses from a coordinator-local table (crates/postgres/src/citus.rs).
    let mut differences = Vec::new();
    for (table, lines) in &plain_shape {
        let on_cluster = cluster_shape.remove(table).unwrap_or_default();
        for line in lines {
            let lane_key = citus::LOCAL_TABLES.contains(&table.as_str())
                && line.starts_with("constraint ")
                && line.contains("FOREIGN KEY");
            if !on_cluster.contains(line) && !lane_key {
                differences.push(format!("{table}: missing on Citus: {line}"));
            }
        }
        for line in &on_cluster {
            if !lines.contains(line) {
                differences.push(format!("{table}: only on Citus: {line}"));
            }
        }
    }
    assert!(
        differences.is_empty(),
        "the distributed schema differs from the plain one:\n  {}",
        differences.join("\n  ")
    );

    #[derive(QueryableByName)]
    struct Distribution {
        #[diesel(sql_type = Text)]
        table_name: String,
        #[diesel(sql_type = Text)]
        kind: String,
        #[diesel(sql_type = Text)]
        column: String,
        #[diesel(sql_type = Text)]
        group: String,
    }
    let placed: BTreeMap<String, Distribution> = sql_query(
        "SELECT table_name::text, citus_table_type AS kind, distribution_column AS column, \
                colocation_id::text AS group FROM citus_tables",
    )
    .load::<Distribution>(cluster)
    .expect("citus_tables")
    .into_iter()
    .map(|row| (row.table_name.clone(), row))
    .collect();
    let tenant_group = &placed["accounts"].group;
    let mut misplaced = Vec::new();
    for (name, has_account_id) in &plain_tables {
        let wanted = citus::placement(name, *has_account_id).expect("every table is placed");
        let actual = placed.get(name);
        let right = match (&wanted, actual) {
            (Placement::Local, None) => true,
            (Placement::Reference, Some(row)) => row.kind == "reference",
            (Placement::Distributed(column), Some(row)) => {
                row.kind == "distributed" && row.column == *column && &row.group == tenant_group
            }
            _ => false,
        };
        if !right {
            misplaced.push(format!(
                "{name}: wanted {wanted:?}, found {}",
                actual.map_or("a local table".to_owned(), |row| format!(
                    "{} by {} in group {}",
                    row.kind, row.column, row.group
                ))
            ));
        }
    }
    assert!(
        misplaced.is_empty(),
        "misplaced tables:\n  {}",
        misplaced.join("\n  ")
    );
}

#[test]
fn the_schema_on_citus_equals_the_plain_schema_with_every_table_placed() {
    if !on_citus() {
        return;
    }
    let distributed = TestDatabase::create();
    let mut cluster = distributed.connection();
    assert_equals_the_plain_schema(&mut cluster, distributed.name());

    // Running the migrations again converts nothing.
    assert_eq!(
        citus::distribute(&mut cluster).expect("a second conversion"),
        Vec::<String>::new()
    );
}

/// The last migration of the first schema that ran distributed: everything after it is a
/// migration written for a database that may already be on Citus.
const FIRST_DISTRIBUTED_SCHEMA: &str = "2026-12-01-000001_upkeep_without_triggers";

#[test]
fn a_later_migration_runs_on_an_already_distributed_database_with_its_data() {
    if !on_citus() {
        return;
    }
    let database = TestDatabase::create_empty();
    run_migrations_through(database.url(), FIRST_DISTRIBUTED_SCHEMA)
        .expect("the first distributed schema");
    let mut cluster = database.connection();
    cluster
        .batch_execute(
            "INSERT INTO users (id, email, created_at) \
                 VALUES ('00000000-0000-7000-8000-000000000001', 'owner@example.com', now()); \
             INSERT INTO accounts (id, name, click_tracking, open_tracking, created_at) \
                 VALUES ('00000000-0000-7000-8000-0000000000a1', 'Shop', false, false, now()); \
             INSERT INTO memberships (account_id, user_id, role, created_at) \
                 VALUES ('00000000-0000-7000-8000-0000000000a1', \
                         '00000000-0000-7000-8000-000000000001', 'owner', now()); \
             INSERT INTO message_stats_daily (account_id, day, sent) \
                 VALUES ('00000000-0000-7000-8000-0000000000a1', \
                         (now() AT TIME ZONE 'UTC')::date, 42)",
        )
        .expect("an account with sends this month, on the distributed schema");

    // The migrations written since, applied to the distributed database with its rows.
    let applied = run_migrations(database.url()).expect("the later migrations on Citus");
    assert!(!applied.is_empty(), "no later migration ran");
    let backfilled = sql_query(
        "SELECT sends::text AS table_name, owner_id::text AS line FROM monthly_sends \
         WHERE account_id = '00000000-0000-7000-8000-0000000000a1'",
    )
    .load::<Line>(&mut cluster)
    .expect("the backfilled month");
    assert_eq!(
        backfilled,
        vec![Line {
            table_name: "42".into(),
            line: "00000000-0000-7000-8000-000000000001".into()
        }],
        "the month's sends, read from the distributed counters into the local table"
    );
    assert_equals_the_plain_schema(&mut cluster, database.name());

    // What a migration yet to be written does: a new account-owned table with a foreign
    // key to accounts, a column and an index on a distributed table. Run as the
    // migrations run (one transaction, one statement at a time: Citus forwards an index
    // on a distributed table to the workers as the text of the query it came in), then
    // the conversion places what is new.
    let later = "CREATE TABLE account_notes (
                     account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
                     id uuid NOT NULL, body text NOT NULL, PRIMARY KEY (account_id, id));
                 -- a comment; with a semicolon
                 ALTER TABLE contacts ADD COLUMN note_count integer NOT NULL DEFAULT 0;
                 CREATE INDEX contacts_note_count ON contacts (account_id, note_count);";
    cluster.batch_execute("BEGIN").expect("BEGIN");
    for statement in migration_statements(later) {
        cluster
            .batch_execute(statement)
            .unwrap_or_else(|error| panic!("{statement}: {error}"));
    }
    cluster.batch_execute("COMMIT").expect("COMMIT");
    assert_eq!(
        citus::distribute(&mut cluster).expect("placing the new table"),
        vec!["account_notes".to_owned()]
    );
    let group = sql_query(
        "SELECT table_name::text, colocation_id::text AS line FROM citus_tables \
         WHERE table_name::text IN ('accounts', 'account_notes') ORDER BY 1",
    )
    .load::<Line>(&mut cluster)
    .expect("the new table's placement");
    assert_eq!(group.len(), 2, "the new table is distributed: {group:?}");
    assert_eq!(group[0].line, group[1].line, "co-located with accounts");
    cluster
        .batch_execute(
            "INSERT INTO account_notes (account_id, id, body) VALUES \
             ('00000000-0000-7000-8000-0000000000a1', gen_random_uuid(), 'kept')",
        )
        .expect("a row of an existing account");
    let orphan = cluster.batch_execute(
        "INSERT INTO account_notes (account_id, id, body) VALUES \
         ('00000000-0000-7000-8000-0000000000ff', gen_random_uuid(), 'orphan')",
    );
    assert!(
        orphan
            .as_ref()
            .is_err_and(|error| error.to_string().contains("foreign key")),
        "the foreign key holds on the shards: {orphan:?}"
    );
}

#[tokio::test]
async fn the_queue_listener_hears_over_the_tls_a_citus_node_starts_with() {
    use mailroom_app::ports::QueueEvent;
    if !on_citus() {
        return;
    }
    // Every Citus node serves TLS with a self-made X.509 version 1 certificate. A URL
    // that names no sslmode prefers TLS, as libpq does (the tests' own URLs disable it).
    let database = TestDatabase::create();
    let preferring = database.url().replace("sslmode=disable", "sslmode=prefer");
    let (heard, mut events) = tokio::sync::mpsc::unbounded_channel();
    let listener = tokio::spawn(mailroom_postgres::listen_for_queued_messages(
        preferring,
        move |event| {
            let _ = heard.send(event);
        },
    ));
    let first = tokio::time::timeout(std::time::Duration::from_secs(10), events.recv()).await;
    assert_eq!(
        first.ok().flatten(),
        Some(QueueEvent::Listening),
        "the listener connects to the coordinator"
    );
    let over_tls = sql_query(
        "SELECT count(*)::text AS table_name, ''::text AS line FROM pg_stat_ssl s \
         JOIN pg_stat_activity a ON a.pid = s.pid WHERE s.ssl AND a.query LIKE 'LISTEN%' \
         AND a.datname = current_database()",
    )
    .load::<Line>(&mut database.connection())
    .expect("pg_stat_ssl");
    assert_eq!(
        over_tls[0].table_name, "1",
        "the LISTEN connection is encrypted"
    );
    listener.abort();
}
