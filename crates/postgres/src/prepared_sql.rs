//! Hand-written SQL that PostgreSQL parses and plans once per connection.
//!
//! diesel's `sql_query` never enters the connection's prepared-statement cache (its text
//! may be built at run time, so caching it could grow the cache without bound): every
//! execution is parsed, analysed and planned again. On the hot paths (an event's upsert
//! and write, the delivery claim and record, the import's batches) that was most of
//! PostgreSQL's time: `pgbench` running the event's statements reached 1,476–1,508
//! transactions/s unprepared against 2,582–2,661 prepared on the same database (see
//! docs/performance.md, "Design choices, measured").
//!
//! [`prepared_sql`] takes text from a closed set (a literal, or one formatted from
//! constants and closed enums, never from data), so the cache stays as small as the code.
//! Its placeholders are written `$1…$n` as in `sql_query`; a placeholder may appear more
//! than once, and `$` followed by a digit means a placeholder wherever it stands (the
//! closed set has none inside quotes). Statements that are cached must name their result
//! columns (no `*`): a prepared statement whose `*` would expand differently after a
//! migration fails with "cached plan must not change result type".

use std::borrow::Cow;

use diesel::{
    pg::Pg,
    query_builder::{AstPass, Query, QueryFragment, QueryId},
    serialize::ToSql,
    sql_types::{HasSqlType, Untyped},
    QueryResult, RunQueryDsl,
};

/// SQL text from a closed set with its bound values; see the module's documentation.
#[must_use = "queries run only when loaded or executed"]
pub(crate) struct PreparedSql<'q> {
    text: Cow<'static, str>,
    values: Vec<Box<dyn QueryFragment<Pg> + Send + 'q>>,
}

/// Raw SQL that diesel keeps prepared per connection (unlike `sql_query`). `text` must come
/// from a closed set: a literal, or formatted from constants only.
pub(crate) fn prepared_sql<'q>(text: impl Into<Cow<'static, str>>) -> PreparedSql<'q> {
    PreparedSql {
        text: text.into(),
        values: Vec::new(),
    }
}

impl<'q> PreparedSql<'q> {
    /// Binds the value of the next placeholder (`$1` first), as `sql_query`'s `bind`.
    pub(crate) fn bind<ST, V>(self, value: V) -> PreparedSql<'q>
    where
        Pg: HasSqlType<ST>,
        V: ToSql<ST, Pg> + Send + 'q,
        ST: Send + 'q,
    {
        let PreparedSql { text, mut values } = self;
        values.push(Box::new(BoundValue::<ST, V> {
            value,
            sql_type: std::marker::PhantomData,
        }));
        PreparedSql { text, values }
    }
}

/// One bound value; walking it writes the next placeholder and collects the value.
struct BoundValue<ST, V> {
    value: V,
    sql_type: std::marker::PhantomData<ST>,
}

impl<ST, V> QueryFragment<Pg> for BoundValue<ST, V>
where
    Pg: HasSqlType<ST>,
    V: ToSql<ST, Pg>,
{
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_bind_param::<ST, V>(&self.value)
    }
}

impl QueryFragment<Pg> for PreparedSql<'_> {
    /// Writes the text with each `$n` replaced by its value's placeholder. diesel numbers
    /// placeholders in the order they are walked, so a repeated `$1` becomes a new
    /// placeholder bound to the same value; the text sent is the same on every call, which
    /// is what the statement cache keys on.
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        let mut rest: &str = &self.text;
        while let Some(dollar) = rest.find('$') {
            let after = &rest[dollar + 1..];
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                out.push_sql(&rest[..=dollar]);
                rest = after;
                continue;
            }
            out.push_sql(&rest[..dollar]);
            let number: usize = after[..digits].parse().unwrap_or(0);
            let value = number
                .checked_sub(1)
                .and_then(|index| self.values.get(index))
                .ok_or_else(|| {
                    diesel::result::Error::QueryBuilderError(
                        format!("placeholder ${number} has no bound value").into(),
                    )
                })?;
            value.walk_ast(out.reborrow())?;
            rest = &after[digits..];
        }
        out.push_sql(rest);
        Ok(())
    }
}

impl QueryId for PreparedSql<'_> {
    type QueryId = ();
    /// No type identifies the text, so the cache keys on the text and the bound types.
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl Query for PreparedSql<'_> {
    type SqlType = Untyped;
}

impl<Conn> RunQueryDsl<Conn> for PreparedSql<'_> {}

#[cfg(test)]
mod tests {
    use diesel::{debug_query, sql_query, sql_types::Integer, QueryableByName};
    use mailroom_test_support::TestDatabase;

    use super::*;

    #[derive(QueryableByName)]
    struct Number {
        #[diesel(sql_type = Integer)]
        n: i32,
    }

    #[derive(QueryableByName)]
    struct Statement {
        #[diesel(sql_type = diesel::sql_types::Text)]
        statement: String,
    }

    #[test]
    fn the_connection_prepares_the_text_once_where_sql_query_prepares_nothing() {
        let database = TestDatabase::create();
        let mut conn = database.connection();
        for n in 0..3 {
            let prepared: Number = prepared_sql("SELECT $1::int4 + 1 AS n")
                .bind::<Integer, _>(n)
                .get_result(&mut conn)
                .expect("prepared");
            assert_eq!(prepared.n, n + 1);
            let unprepared: Number = sql_query("SELECT $1::int4 + 2 AS n")
                .bind::<Integer, _>(n)
                .get_result(&mut conn)
                .expect("unprepared");
            assert_eq!(unprepared.n, n + 2);
        }
        let statements: Vec<String> = sql_query("SELECT statement FROM pg_prepared_statements")
            .load::<Statement>(&mut conn)
            .expect("pg_prepared_statements")
            .into_iter()
            .map(|row| row.statement)
            .collect();
        let count = |needle: &str| statements.iter().filter(|s| s.contains(needle)).count();
        assert_eq!(count("+ 1 AS n"), 1, "{statements:?}");
        assert_eq!(count("+ 2 AS n"), 0, "{statements:?}");
    }

    #[test]
    fn each_placeholder_is_written_in_order_and_a_repeated_one_is_bound_again() {
        let query = prepared_sql("SELECT $2 + $1, $1 AS \"a$b\"")
            .bind::<Integer, _>(1)
            .bind::<Integer, _>(2);
        let debug = debug_query::<Pg, _>(&query).to_string();
        assert_eq!(
            debug, "SELECT $1 + $2, $3 AS \"a$b\" -- binds: [2, 1, 1]",
            "{debug}"
        );
    }

    #[test]
    fn a_placeholder_without_a_value_is_an_error_not_a_panic() {
        let query = prepared_sql("SELECT $3").bind::<Integer, _>(1);
        let mut sql = String::new();
        let mut builder = diesel::pg::PgQueryBuilder::default();
        let result = query.to_sql(&mut builder, &Pg);
        sql.push_str(&diesel::query_builder::QueryBuilder::finish(builder));
        assert!(result.is_err(), "built {sql:?}");
    }
}
