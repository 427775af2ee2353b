//! The migrations run one statement at a time.
//!
//! diesel hands a migration's `up.sql` to the server as one multi-statement query. On a
//! Citus coordinator that breaks a later migration on an already-distributed schema:
//! Citus forwards a `CREATE INDEX` (and `REINDEX`, `DROP INDEX`) on a distributed table to
//! the workers' copies of the table as the text of the whole query it came in, and the
//! workers refuse a multi-statement text there ("cannot insert multiple commands into a
//! prepared statement"). Sent one by one, each statement is its own text. The same code
//! runs on plain PostgreSQL, where it changes nothing: the migration still runs in one
//! transaction and diesel still records it.
//!
//! Splitting needs only PostgreSQL's lexical rules for what can hide a `;` (quoted
//! strings and identifiers, dollar quoting, line and block comments), written out here:
//! a parsing crate would have to accept every statement the migrations use, and the only
//! complete parser (libpg_query) is C built with the crate.

use diesel::{
    connection::BoxableConnection,
    migration::{Migration, MigrationMetadata, MigrationName, Result as MigrationResult},
    pg::Pg,
};

/// Every migration's directory name and `up.sql`, in order (written by `build.rs`).
const SCRIPTS: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/migration_scripts.rs"));

/// The `up.sql` of the migration named `name`.
pub fn up_script(name: &str) -> Option<&'static str> {
    SCRIPTS
        .iter()
        .find(|(script, _)| *script == name)
        .map(|(_, up)| *up)
}

/// An embedded migration whose `up.sql` runs one statement at a time.
pub struct OneStatementAtATime<'a> {
    pub migration: &'a dyn Migration<Pg>,
    pub up: &'static str,
}

impl Migration<Pg> for OneStatementAtATime<'_> {
    fn run(&self, conn: &mut dyn BoxableConnection<Pg>) -> MigrationResult<()> {
        for statement in statements(self.up) {
            conn.batch_execute(statement).map_err(|error| {
                format!("migration {} failed: {error}\nin: {statement}", self.name())
            })?;
        }
        Ok(())
    }

    fn revert(&self, conn: &mut dyn BoxableConnection<Pg>) -> MigrationResult<()> {
        self.migration.revert(conn)
    }

    fn metadata(&self) -> &dyn MigrationMetadata {
        self.migration.metadata()
    }

    fn name(&self) -> &dyn MigrationName {
        self.migration.name()
    }
}

/// The statements of `script`, each with its terminating `;` cut off; pieces holding
/// nothing but blanks and comments are left out.
pub fn statements(script: &str) -> Vec<&str> {
    let bytes = script.as_bytes();
    let mut pieces = Vec::new();
    let (mut start, mut at, mut has_code) = (0, 0, false);
    while at < bytes.len() {
        match bytes[at] {
            b'-' if bytes.get(at + 1) == Some(&b'-') => {
                at = find_from(bytes, at, b"\n").map_or(bytes.len(), |end| end + 1);
            }
            b'/' if bytes.get(at + 1) == Some(&b'*') => {
                at = block_comment_end(bytes, at);
            }
            quote @ (b'\'' | b'"') => {
                has_code = true;
                at = quoted_end(bytes, at, quote);
            }
            b'$' => {
                has_code = true;
                at = match dollar_tag(bytes, at) {
                    Some(tag) => find_from(bytes, at + tag.len(), tag)
                        .map_or(bytes.len(), |end| end + tag.len()),
                    None => at + 1,
                };
            }
            b';' => {
                if has_code {
                    pieces.push(script[start..at].trim());
                }
                at += 1;
                start = at;
                has_code = false;
            }
            byte => {
                has_code |= !byte.is_ascii_whitespace();
                at += 1;
            }
        }
    }
    if has_code {
        pieces.push(script[start..].trim());
    }
    pieces
}

/// The first position at or after `from` where `needle` starts.
fn find_from(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes[from..]
        .windows(needle.len())
        .position(|window| window == needle)
        .map(|offset| from + offset)
}

/// Past the block comment opening at `at` (PostgreSQL's nest).
fn block_comment_end(bytes: &[u8], mut at: usize) -> usize {
    let mut depth = 0;
    while at < bytes.len() {
        if bytes[at..].starts_with(b"/*") {
            depth += 1;
            at += 2;
        } else if bytes[at..].starts_with(b"*/") {
            depth -= 1;
            at += 2;
            if depth == 0 {
                return at;
            }
        } else {
            at += 1;
        }
    }
    at
}

/// Past the string or identifier opening at `at`; a doubled quote is one quote inside.
fn quoted_end(bytes: &[u8], mut at: usize, quote: u8) -> usize {
    at += 1;
    while at < bytes.len() {
        if bytes[at] == quote {
            if bytes.get(at + 1) == Some(&quote) {
                at += 2;
                continue;
            }
            return at + 1;
        }
        at += 1;
    }
    at
}

/// The dollar-quote tag (`$$`, `$body$`) opening at `at`, if one does: a `$` followed by
/// an identifier that does not start with a digit, then `$`. (`$1` is a parameter.)
fn dollar_tag(bytes: &[u8], at: usize) -> Option<&[u8]> {
    let mut end = at + 1;
    while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
        end += 1;
    }
    let starts_with_digit = bytes.get(at + 1).is_some_and(u8::is_ascii_digit);
    (bytes.get(end) == Some(&b'$') && !starts_with_digit).then(|| &bytes[at..=end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_end_at_semicolons_outside_quotes_comments_and_bodies() {
        let script = "-- a comment; not a statement\n\
            CREATE TABLE t (a text DEFAULT 'x;y', \"b;c\" int);\n\
            /* a block; /* nested; */ still comment; */\n\
            CREATE FUNCTION f() RETURNS trigger AS $$ BEGIN RETURN NEW; END $$ LANGUAGE plpgsql;\n\
            DO $body$ BEGIN PERFORM 1; END $body$;\n\
            SELECT 'it''s; fine', $1 ;\n\
            -- trailing comment only\n";
        assert_eq!(
            statements(script),
            vec![
                "-- a comment; not a statement\nCREATE TABLE t (a text DEFAULT 'x;y', \"b;c\" int)",
                "/* a block; /* nested; */ still comment; */\nCREATE FUNCTION f() RETURNS trigger AS $$ BEGIN RETURN NEW; END $$ LANGUAGE plpgsql",
                "DO $body$ BEGIN PERFORM 1; END $body$",
                "SELECT 'it''s; fine', $1",
            ]
        );
    }

    #[test]
    fn a_script_without_a_final_semicolon_keeps_its_last_statement() {
        assert_eq!(
            statements("SELECT 1; SELECT 2"),
            vec!["SELECT 1", "SELECT 2"]
        );
        assert!(statements("  -- nothing\n ; ;").is_empty());
    }

    #[test]
    fn every_migration_has_its_script_and_splits_into_statements() {
        for (name, up) in SCRIPTS {
            let pieces = statements(up);
            assert!(!pieces.is_empty(), "{name} has no statement");
            for piece in &pieces {
                assert!(!piece.ends_with(';'), "{name}: {piece}");
            }
        }
        assert_eq!(SCRIPTS.len(), crate::embedded_migration_names().len());
    }
}
