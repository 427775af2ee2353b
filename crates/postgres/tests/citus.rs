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
    run_migrations, url_with_database,
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

#[test]
fn the_schema_on_citus_equals_the_plain_schema_with_every_table_placed() {
    if !on_citus() {
        return;
    }
    let distributed = TestDatabase::create();
    // The plain schema: the same migrations in a database of the coordinator that has no
    // Citus extension (nothing is distributed there).
    let plain_name = format!("{}_plain", distributed.name());
    let admin = admin_url();
    PgConnection::establish(&admin)
        .expect("coordinator")
        .batch_execute(&format!("CREATE DATABASE \"{plain_name}\""))
        .expect("creating the plain database");
    let plain_url = url_with_database(&admin, &plain_name).expect("plain URL");
    run_migrations(&plain_url).expect("migrating the plain database");
    let mut plain = PgConnection::establish(&plain_url).expect("plain database");
    let mut cluster = distributed.connection();

    let plain_tables = tables(&mut plain);
    let names: Vec<String> = plain_tables.iter().map(|(name, _)| name.clone()).collect();
    let plain_shape = shape(&mut plain, &names);
    let mut cluster_shape = shape(&mut cluster, &names);
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
    .load::<Distribution>(&mut cluster)
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

    // Running the migrations again converts nothing.
    assert_eq!(
        citus::distribute(&mut cluster).expect("a second conversion"),
        Vec::<String>::new()
    );
}
