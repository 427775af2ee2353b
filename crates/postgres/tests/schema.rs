//! Keeps the hand-written diesel schema (`src/schema.rs`) honest against the migrations,
//! and keeps the tables distributable by `account_id` (docs/design.md#12-scaling-out).
//!
//! `schema.rs` is read as text by a deliberately small parser: it understands
//! `diesel::table! { name (pk, …) { column -> Type, … } }` blocks with comments, doc
//! comments and `use …;` lines inside them, and refuses anything else by name rather
//! than guessing.

use std::collections::{BTreeMap, BTreeSet};

use diesel::{pg::PgConnection, sql_query, sql_types::Text, QueryableByName, RunQueryDsl};
use mailroom_test_support::TestDatabase;

const SCHEMA_RS: &str = include_str!("../src/schema.rs");
const MIGRATIONS_TABLE: &str = "__diesel_schema_migrations";

/// Tables that belong to no account and therefore carry no `account_id`. A new global
/// table must be added here, with a comment saying why it is not account-owned.
const GLOBAL_TABLES: &[&str] = &[
    // People: a user may be a member of many accounts.
    "users",
    // A personal access token acts for its user, across the user's accounts.
    "tokens",
    // A console session and a login link sign a user in, like a token, across the user's
    // accounts (docs/console.md).
    "console_sessions",
    "console_login_links",
    // The tenant itself: its key `id` is what every other table calls `account_id`.
    "accounts",
];

#[test]
fn schema_matches_migrations() {
    let database = TestDatabase::create();
    let actual = database_tables(&mut database.connection());
    let declared = parse_schema(SCHEMA_RS);

    let differences = compare(&declared, &actual);
    assert!(
        differences.is_empty(),
        "crates/postgres/src/schema.rs does not match the migrated database \
         ({} difference(s)):\n  - {}",
        differences.len(),
        differences.join("\n  - ")
    );
}

#[test]
fn account_owned_tables_are_keyed_by_account() {
    let database = TestDatabase::create();
    let problems = account_key_problems(&mut database.connection());
    assert!(
        problems.is_empty(),
        "tables not keyed by account (docs/design.md#12-scaling-out):\n  - {}",
        problems.join("\n  - ")
    );
}

#[test]
fn a_trigger_keeps_the_schema_from_being_distributed() {
    use diesel::connection::SimpleConnection;
    let database = TestDatabase::create();
    let mut connection = database.connection();
    connection
        .batch_execute(
            "CREATE FUNCTION nothing() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$; \
             CREATE TRIGGER nothing_after_insert AFTER INSERT ON messages \
             FOR EACH STATEMENT EXECUTE FUNCTION nothing();",
        )
        .expect("a trigger");
    let problems = account_key_problems(&mut connection);
    assert!(
        problems
            .iter()
            .any(|problem| problem.contains("`messages.nothing_after_insert`")),
        "{problems:?}"
    );
}

/// What keeps the tables of `connection` from being distributed by `account_id`.
fn account_key_problems(connection: &mut PgConnection) -> Vec<String> {
    let tables = database_tables(connection);
    let keys = unique_keys(connection);
    let mut problems = Vec::new();
    for (name, table) in &tables {
        let has_account_id = table.columns.contains_key("account_id");
        if !has_account_id && !GLOBAL_TABLES.contains(&name.as_str()) {
            problems.push(format!(
                "table `{name}` has no `account_id` column: every table is account-owned \
                 unless listed in GLOBAL_TABLES (with a reason) in this test"
            ));
        }
        if has_account_id && name != "accounts" {
            let table_keys = keys.get(name).map(Vec::as_slice).unwrap_or_default();
            // Citus distributes a table only when every primary key, unique constraint
            // and unique index includes the distribution column.
            let keyed = !table_keys.is_empty()
                && table_keys
                    .iter()
                    .all(|key| key.columns.iter().any(|column| column == "account_id"));
            if !keyed {
                let listed: Vec<String> = table_keys
                    .iter()
                    .map(|key| format!("{} {} ({})", key.kind, key.name, key.columns.join(", ")))
                    .collect();
                problems.push(format!(
                    "table `{name}` has `account_id` but not every primary key, unique \
                     constraint and unique index includes it; its keys: [{}]",
                    listed.join("; ")
                ));
            }
        }
    }
    // Citus distributes no table that has a trigger (and a statement trigger's transition
    // table is not found on a shard): the repository keeps what triggers used to
    // (crates/postgres/src/upkeep.rs; docs/operations.md, "Upkeep in the repository").
    let triggers: Vec<Named> = sql_query(
        "SELECT tgrelid::regclass::text || '.' || tgname AS name FROM pg_trigger \
         WHERE NOT tgisinternal ORDER BY 1",
    )
    .load(connection)
    .expect("triggers");
    for trigger in triggers {
        problems.push(format!(
            "trigger `{}`: no table may have a trigger; keep its work in the repository",
            trigger.name
        ));
    }
    problems
}

#[derive(QueryableByName)]
struct Named {
    #[diesel(sql_type = Text)]
    name: String,
}

// ---------------------------------------------------------------------------------------
// The model both sides are reduced to.

#[derive(Debug, Default)]
struct Table {
    primary_key: Vec<String>,
    columns: BTreeMap<String, Column>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Column {
    /// The diesel SQL type without an outer `Nullable<…>`, e.g. `Timestamptz`, `Array<Text>`.
    sql_type: String,
    nullable: bool,
}

impl std::fmt::Display for Column {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.nullable {
            write!(f, "Nullable<{}>", self.sql_type)
        } else {
            f.write_str(&self.sql_type)
        }
    }
}

fn compare(declared: &BTreeMap<String, Table>, actual: &BTreeMap<String, Table>) -> Vec<String> {
    let mut differences = Vec::new();
    for name in actual.keys().filter(|name| !declared.contains_key(*name)) {
        differences.push(format!(
            "table `{name}` is in the database but not in schema.rs"
        ));
    }
    for name in declared.keys().filter(|name| !actual.contains_key(*name)) {
        differences.push(format!(
            "table `{name}` is in schema.rs but not in the database"
        ));
    }
    for (name, ours) in declared {
        let Some(theirs) = actual.get(name) else {
            continue;
        };
        if ours.primary_key != theirs.primary_key {
            differences.push(format!(
                "table `{name}`: schema.rs declares primary key ({}), the database has ({})",
                ours.primary_key.join(", "),
                theirs.primary_key.join(", ")
            ));
        }
        let all: BTreeSet<&String> = ours.columns.keys().chain(theirs.columns.keys()).collect();
        for column in all {
            match (ours.columns.get(column), theirs.columns.get(column)) {
                (Some(ours), None) => differences.push(format!(
                    "`{name}.{column}`: in schema.rs as `{ours}` but not in the database"
                )),
                (None, Some(theirs)) => differences.push(format!(
                    "`{name}.{column}`: in the database but not in schema.rs (expected `{column} -> {theirs},`)"
                )),
                (Some(ours), Some(theirs)) if ours != theirs => differences.push(format!(
                    "`{name}.{column}`: schema.rs says `{ours}`, the database needs `{theirs}`{}",
                    match (ours.nullable, theirs.nullable) {
                        (true, false) => " (the column is NOT NULL)",
                        (false, true) => " (the column is nullable)",
                        _ => "",
                    }
                )),
                _ => {}
            }
        }
    }
    differences
}

// ---------------------------------------------------------------------------------------
// The database side.

#[derive(QueryableByName)]
struct ColumnRow {
    #[diesel(sql_type = Text)]
    table_name: String,
    #[diesel(sql_type = Text)]
    column_name: String,
    #[diesel(sql_type = Text)]
    data_type: String,
    #[diesel(sql_type = Text)]
    udt_name: String,
    #[diesel(sql_type = Text)]
    is_nullable: String,
}

#[derive(QueryableByName)]
struct KeyColumnRow {
    #[diesel(sql_type = Text)]
    table_name: String,
    #[diesel(sql_type = Text)]
    constraint_name: String,
    #[diesel(sql_type = Text)]
    constraint_type: String,
    #[diesel(sql_type = Text)]
    column_name: String,
}

struct UniqueKey {
    kind: String,
    name: String,
    columns: Vec<String>,
}

/// Every base table of the public schema but diesel's own, with columns and primary key.
fn database_tables(connection: &mut PgConnection) -> BTreeMap<String, Table> {
    let rows: Vec<ColumnRow> = sql_query(
        "SELECT c.table_name::text, c.column_name::text, c.data_type::text, \
                c.udt_name::text, c.is_nullable::text \
         FROM information_schema.columns c \
         JOIN information_schema.tables t \
           ON t.table_schema = c.table_schema AND t.table_name = c.table_name \
         WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE' \
           AND c.table_name <> $1 \
         ORDER BY c.table_name, c.ordinal_position",
    )
    .bind::<Text, _>(MIGRATIONS_TABLE)
    .load(connection)
    .expect("reading information_schema.columns");
    let mut tables: BTreeMap<String, Table> = BTreeMap::new();
    for row in rows {
        let column = Column {
            sql_type: diesel_type(&row.data_type, &row.udt_name),
            nullable: row.is_nullable == "YES",
        };
        tables
            .entry(row.table_name)
            .or_default()
            .columns
            .insert(row.column_name, column);
    }
    for (table, keys) in unique_keys(connection) {
        if let (Some(table), Some(primary)) = (
            tables.get_mut(&table),
            keys.into_iter().find(|key| key.kind == "PRIMARY KEY"),
        ) {
            table.primary_key = primary.columns;
        }
    }
    tables
}

/// Primary keys, unique constraints and unique indexes (partial and expression ones
/// included) of the public schema, columns in key order; an expression reads
/// `(expression)`.
fn unique_keys(connection: &mut PgConnection) -> BTreeMap<String, Vec<UniqueKey>> {
    let rows: Vec<KeyColumnRow> = sql_query(
        "SELECT t.relname::text AS table_name, i.relname::text AS constraint_name, \
                CASE WHEN ix.indisprimary THEN 'PRIMARY KEY' ELSE 'UNIQUE' END AS constraint_type, \
                COALESCE(a.attname::text, '(expression)') AS column_name \
         FROM pg_index ix \
         JOIN pg_class t ON t.oid = ix.indrelid \
         JOIN pg_class i ON i.oid = ix.indexrelid \
         JOIN pg_namespace n ON n.oid = t.relnamespace \
         CROSS JOIN LATERAL unnest(ix.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord) \
         LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum \
         WHERE n.nspname = 'public' AND ix.indisunique \
         ORDER BY t.relname, i.relname, k.ord",
    )
    .load(connection)
    .expect("reading primary-key and unique constraints");
    let mut keys: BTreeMap<String, Vec<UniqueKey>> = BTreeMap::new();
    for row in rows {
        let table = keys.entry(row.table_name).or_default();
        match table.last_mut() {
            Some(key) if key.name == row.constraint_name => key.columns.push(row.column_name),
            _ => table.push(UniqueKey {
                kind: row.constraint_type,
                name: row.constraint_name,
                columns: vec![row.column_name],
            }),
        }
    }
    keys
}

/// The diesel type for a PostgreSQL column type; an unmapped type is named so that the
/// mismatch message says what to add here.
fn diesel_type(data_type: &str, udt_name: &str) -> String {
    if data_type == "ARRAY" {
        let element = udt_name.trim_start_matches('_');
        return format!("Array<{}>", diesel_type(element, element));
    }
    let mapped = match data_type {
        "uuid" => "Uuid",
        "text" => "Text",
        "timestamp with time zone" | "timestamptz" => "Timestamptz",
        "boolean" | "bool" => "Bool",
        "smallint" | "int2" => "Int2",
        "integer" | "int4" => "Int4",
        "bigint" | "int8" => "Int8",
        "double precision" | "float8" => "Float8",
        "bytea" => "Bytea",
        "jsonb" => "Jsonb",
        "date" => "Date",
        _ => return format!("<unmapped PostgreSQL type {data_type} ({udt_name})>"),
    };
    mapped.to_owned()
}

// ---------------------------------------------------------------------------------------
// The schema.rs side: a tokenizer that drops comments, and a parser for `table!` blocks.

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    /// `->`, `::` or a single punctuation character.
    Punct(&'static str),
    Other(char),
}

fn tokenize(source: &str) -> Vec<(Token, usize)> {
    const PUNCTS: [&str; 10] = ["->", "::", "{", "}", "(", ")", "<", ">", ",", "!"];
    let mut tokens = Vec::new();
    let mut rest = source;
    let mut line = 1;
    while let Some(c) = rest.chars().next() {
        let skip = if c.is_whitespace() {
            c.len_utf8()
        } else if rest.starts_with("//") {
            rest.find('\n').unwrap_or(rest.len())
        } else if rest.starts_with("/*") {
            rest.find("*/").map_or(rest.len(), |end| end + 2)
        } else if c.is_alphabetic() || c == '_' {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            tokens.push((Token::Ident(rest[..end].to_owned()), line));
            end
        } else if let Some(punct) = PUNCTS.iter().find(|p| rest.starts_with(**p)) {
            tokens.push((Token::Punct(punct), line));
            punct.len()
        } else {
            tokens.push((Token::Other(c), line));
            c.len_utf8()
        };
        line += rest[..skip].matches('\n').count();
        rest = &rest[skip..];
    }
    tokens
}

struct Parser {
    tokens: Vec<(Token, usize)>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at).map(|(token, _)| token)
    }

    fn fail(&self, expected: &str) -> ! {
        let (found, line) = self
            .tokens
            .get(self.at)
            .map_or(("end of file".to_owned(), 0), |(token, line)| {
                (format!("{token:?}"), *line)
            });
        panic!(
            "schema.rs line {line}: expected {expected}, found {found}. This test's parser \
             understands only `diesel::table! {{ name (pk, …) {{ column -> Type, … }} }}`; \
             extend it if schema.rs needs more"
        )
    }

    fn punct(&mut self, punct: &'static str) {
        if self.peek() != Some(&Token::Punct(punct)) {
            self.fail(&format!("`{punct}`"));
        }
        self.at += 1;
    }

    fn eat(&mut self, punct: &'static str) -> bool {
        let found = self.peek() == Some(&Token::Punct(punct));
        if found {
            self.at += 1;
        }
        found
    }

    fn ident(&mut self, what: &str) -> String {
        match self.peek() {
            Some(Token::Ident(ident)) => {
                let ident = ident.clone();
                self.at += 1;
                ident
            }
            _ => self.fail(what),
        }
    }

    /// `name (pk, …) { column -> Type, … }`, after `table! {`, up to its closing `}`.
    fn table(&mut self) -> (String, Table) {
        let name = self.ident("a table name");
        let mut table = Table::default();
        self.punct("(");
        while !self.eat(")") {
            table.primary_key.push(self.ident("a primary-key column"));
            if !self.eat(",") && self.peek() != Some(&Token::Punct(")")) {
                self.fail("`,` or `)`");
            }
        }
        self.punct("{");
        while !self.eat("}") {
            let column = self.ident("a column name");
            self.punct("->");
            let sql_type = self.sql_type();
            let column_type = match sql_type.strip_prefix("Nullable<") {
                Some(inner) => Column {
                    sql_type: inner[..inner.len() - 1].to_owned(),
                    nullable: true,
                },
                None => Column {
                    sql_type,
                    nullable: false,
                },
            };
            if table.columns.insert(column.clone(), column_type).is_some() {
                panic!("schema.rs: table `{name}` declares column `{column}` twice");
            }
            if !self.eat(",") && self.peek() != Some(&Token::Punct("}")) {
                self.fail("`,` or `}`");
            }
        }
        (name, table)
    }

    /// A type such as `Text`, `sql_types::Uuid` or `Nullable<Array<Text>>`, rendered
    /// without paths: `Nullable<Array<Text>>`.
    fn sql_type(&mut self) -> String {
        let mut name = self.ident("a type");
        while self.eat("::") {
            name = self.ident("a type after `::`");
        }
        if self.eat("<") {
            let mut arguments = vec![self.sql_type()];
            while self.eat(",") {
                arguments.push(self.sql_type());
            }
            self.punct(">");
            name = format!("{name}<{}>", arguments.join(", "));
        }
        name
    }

    /// Skips `use path::*;` lines, which diesel allows at the top of a `table!` body.
    fn skip_uses(&mut self) {
        while self.peek() == Some(&Token::Ident("use".into())) {
            while self.peek().is_some_and(|token| *token != Token::Other(';')) {
                self.at += 1;
            }
            self.at += 1;
        }
    }
}

fn parse_schema(source: &str) -> BTreeMap<String, Table> {
    let mut parser = Parser {
        tokens: tokenize(source),
        at: 0,
    };
    let mut tables = BTreeMap::new();
    while let Some(token) = parser.peek() {
        let is_table_macro = *token == Token::Ident("table".into())
            && parser.tokens.get(parser.at + 1).map(|(t, _)| t) == Some(&Token::Punct("!"));
        if !is_table_macro {
            parser.at += 1;
            continue;
        }
        parser.at += 2;
        parser.punct("{");
        parser.skip_uses();
        let (name, table) = parser.table();
        parser.punct("}");
        if tables.insert(name.clone(), table).is_some() {
            panic!("schema.rs declares table `{name}` twice");
        }
    }
    assert!(
        !tables.is_empty(),
        "found no `table!` block in schema.rs: the parser is out of step with the file"
    );
    tables
}
