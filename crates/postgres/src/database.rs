use std::{borrow::Cow, time::Duration};

use diesel::migration::MigrationSource;
use diesel::{
    connection::{AnsiTransactionManager, SimpleConnection, TransactionManager},
    pg::PgConnection,
    r2d2::{ConnectionManager, CustomizeConnection, Error as R2d2Error, Pool},
    Connection,
};
use diesel_migrations::{embed_migrations, EmbeddedMigrations, MigrationHarness};
use mailroom_app::{
    ports::{Database, UnitOfWork},
    AppError, StoreError,
};

use std::sync::Arc;

use crate::{
    error::store_error,
    pool_health::{checkout, ConnectHealth, ReportFailures, ReportSuccess},
    repositories::PgUnitOfWork,
};

const MIGRATIONS: EmbeddedMigrations = embed_migrations!("../../migrations");

/// Serialises concurrent migrators (several replicas starting at once) on one lock.
const MIGRATION_LOCK_KEY: i64 = 0x6d61_696c_726f_6f6d; // "mailroom"

/// Pool sizing.
#[derive(Debug, Clone)]
pub struct PoolSettings {
    /// Most connections held open.
    pub max_size: u32,
    /// How long a request waits for a connection before the store counts as unavailable.
    pub connection_timeout: Duration,
    /// `statement_timeout` of every connection's session: it bounds the statements run
    /// outside a transaction ([`Database::run_single_statement`]) and the transactions of
    /// a [`PgDatabase::with_statement_timeout`] of the same value. Transactions of another
    /// value set their own (`SET LOCAL`). `None` keeps the server's setting.
    pub statement_timeout: Option<Duration>,
}

impl Default for PoolSettings {
    fn default() -> Self {
        Self {
            max_size: 16,
            connection_timeout: Duration::from_secs(5),
            statement_timeout: None,
        }
    }
}

/// The `Database` port over a pool of PostgreSQL connections.
#[derive(Clone)]
pub struct PgDatabase {
    pool: Pool<ConnectionManager<PgConnection>>,
    /// Whether connecting currently fails, so checkouts answer at once during an outage.
    health: Arc<ConnectHealth>,
    connection_timeout: Duration,
    /// `statement_timeout` of each transaction; `None` keeps the server's setting.
    statement_timeout: Option<Duration>,
    /// `statement_timeout` of every connection's session (`PoolSettings`).
    session_statement_timeout: Option<Duration>,
    /// What opens a transaction here (`begin_sql`), made once rather than per transaction.
    begin: Cow<'static, str>,
    /// Whether the database is a Citus coordinator, learnt on the first connection that
    /// asks (some statements take another form there: `PgUnitOfWork::on_citus`).
    on_citus: Arc<std::sync::OnceLock<bool>>,
}

/// `timeout` as the milliseconds `statement_timeout` takes; at least 1, since 0 would turn
/// the limit off (the timeouts here are never zero: zero means "none" and is `None`).
fn timeout_millis(timeout: Duration) -> u128 {
    timeout.as_millis().max(1)
}

/// What opens a transaction whose statements are limited to `ours` on a session limited to
/// `session`. BEGIN and a `SET LOCAL` travel in one message, so the transaction's first
/// round trip also sets its timeout (docs/performance.md, "Design choices, measured"); `TO
/// DEFAULT` is the value the session started with, that is the server's setting.
fn begin_sql(ours: Option<Duration>, session: Option<Duration>) -> Cow<'static, str> {
    match ours {
        _ if ours == session => Cow::Borrowed("BEGIN"),
        Some(timeout) => Cow::Owned(format!(
            "BEGIN; SET LOCAL statement_timeout = {}",
            timeout_millis(timeout)
        )),
        None => Cow::Borrowed("BEGIN; SET LOCAL statement_timeout TO DEFAULT"),
    }
}

impl PgDatabase {
    /// A pool on `url`. Connections open lazily, so this succeeds while the server is down;
    /// requests then answer 503 until it is back.
    ///
    /// # Errors
    /// [`StoreError::Other`] when the pool cannot be built.
    pub fn connect(url: &str, settings: &PoolSettings) -> Result<Self, StoreError> {
        let manager = ConnectionManager::<PgConnection>::new(url);
        let health = Arc::new(ConnectHealth::default());
        let session_statement_timeout = settings.statement_timeout.filter(|t| !t.is_zero());
        let pool = Pool::builder()
            .max_size(settings.max_size)
            .min_idle(Some(1))
            .connection_timeout(settings.connection_timeout)
            // Diesel marks a connection broken after a failed command, so r2d2's check on
            // return suffices; a `SELECT 1` on every checkout would double round trips.
            .test_on_check_out(false)
            .error_handler(Box::new(ReportFailures(health.clone())))
            .connection_customizer(Box::new(OpenSession {
                report: ReportSuccess(health.clone()),
                statement_timeout: session_statement_timeout,
            }))
            .build_unchecked(manager);
        Ok(Self {
            pool,
            health,
            connection_timeout: settings.connection_timeout,
            // The workers' database: the server's setting (`with_statement_timeout` for
            // requests).
            statement_timeout: None,
            session_statement_timeout,
            begin: begin_sql(None, session_statement_timeout),
            on_citus: Arc::default(),
        })
    }

    /// Whether the database is a Citus coordinator (asked once; a failed question is asked
    /// again on the next connection, and the statement that follows fails the same way).
    fn on_citus(&self, conn: &mut PgConnection) -> bool {
        if let Some(known) = self.on_citus.get() {
            return *known;
        }
        match crate::citus::is_citus(conn) {
            Ok(found) => *self.on_citus.get_or_init(|| found),
            Err(_) => false,
        }
    }

    /// The same pool, with every transaction's statements limited to `timeout` (`SET
    /// LOCAL statement_timeout`, so the connection returns to the pool unchanged, unless
    /// the pool's sessions already have that timeout: `PoolSettings::statement_timeout`).
    /// A statement that runs longer is cancelled and the transaction fails with
    /// [`StoreError::TimedOut`]. `None` keeps the server's setting.
    #[must_use]
    pub fn with_statement_timeout(&self, timeout: Option<Duration>) -> Self {
        let statement_timeout = timeout.filter(|timeout| !timeout.is_zero());
        Self {
            statement_timeout,
            begin: begin_sql(statement_timeout, self.session_statement_timeout),
            ..self.clone()
        }
    }

    /// Runs `sql` on a pooled connection outside any transaction (the simple protocol: one
    /// round trip, no statement prepared). For statements that are their own commit, such
    /// as a `NOTIFY` ([`crate::PgQueueWakeup`]).
    pub(crate) fn execute_simple(&self, sql: &str) -> Result<(), String> {
        let mut conn = checkout(&self.pool, &self.health, self.connection_timeout)?;
        conn.batch_execute(sql).map_err(|error| error.to_string())
    }

    /// How many connections the pool holds and how many are idle.
    pub fn pool_state(&self) -> (u32, u32) {
        let state = self.pool.state();
        (state.connections, state.idle_connections)
    }
}

impl Database for PgDatabase {
    fn run_in_transaction(
        &self,
        work: &mut dyn FnMut(&mut dyn UnitOfWork) -> Result<(), AppError>,
    ) -> Result<(), AppError> {
        let mut conn = checkout(&self.pool, &self.health, self.connection_timeout)
            .map_err(AppError::Unavailable)?;
        let conn: &mut PgConnection = &mut conn;
        let on_citus = self.on_citus(conn);
        if let Err(error) = AnsiTransactionManager::begin_transaction_sql(conn, &self.begin) {
            // Diesel counts the transaction as open only when the whole batch succeeded;
            // close whatever the server opened so the connection goes back clean.
            let _ = conn.batch_execute("ROLLBACK");
            return Err(store_error(error).into());
        }
        // The rest as diesel's `Connection::transaction`: commit on success, roll back on
        // failure and answer the work's error, unless the rollback itself failed.
        let outcome = {
            let mut unit = PgUnitOfWork::new(conn, on_citus);
            work(&mut unit)
        };
        match outcome {
            Ok(()) => AnsiTransactionManager::commit_transaction(conn)
                .map_err(|error| store_error(error).into()),
            Err(error) => match AnsiTransactionManager::rollback_transaction(conn) {
                Ok(()) | Err(diesel::result::Error::BrokenTransactionManager) => Err(error),
                Err(rollback_error) => Err(store_error(rollback_error).into()),
            },
        }
    }

    fn run_single_statement(
        &self,
        work: &mut dyn FnMut(&mut dyn UnitOfWork) -> Result<(), AppError>,
    ) -> Result<(), AppError> {
        // The session's timeout is the only bound a statement outside a transaction has;
        // when this database's differs, the statement takes a transaction of its own.
        if self.statement_timeout != self.session_statement_timeout {
            return self.run_in_transaction(work);
        }
        let mut conn = checkout(&self.pool, &self.health, self.connection_timeout)
            .map_err(AppError::Unavailable)?;
        let on_citus = self.on_citus(&mut conn);
        let mut unit = PgUnitOfWork::new(&mut conn, on_citus);
        work(&mut unit)
    }

    fn check_health(&self) -> Result<(), StoreError> {
        let mut conn = checkout(&self.pool, &self.health, self.connection_timeout)
            .map_err(StoreError::Unavailable)?;
        conn.batch_execute("SELECT 1")
            .map_err(|e| match store_error(e) {
                StoreError::Other(message) => StoreError::Unavailable(message),
                other => other,
            })
    }
}

/// Opens each connection's session: reports the connection to [`ConnectHealth`] and sets
/// the session's statement timeout.
#[derive(Debug)]
struct OpenSession {
    report: ReportSuccess,
    statement_timeout: Option<Duration>,
}

impl CustomizeConnection<PgConnection, R2d2Error> for OpenSession {
    fn on_acquire(&self, connection: &mut PgConnection) -> Result<(), R2d2Error> {
        self.report.on_acquire(connection)?;
        // On Citus, statements are planned with their values every time: a generic plan
        // (PostgreSQL's choice after five executions of a prepared statement) keeps Citus
        // from routing statements such as the record's `UPDATE … FROM unnest(…)` to the
        // account's shard, and it would send them to every shard. Elsewhere nothing.
        connection
            .batch_execute(
                "SELECT set_config('plan_cache_mode', 'force_custom_plan', false) \
                 FROM pg_extension WHERE extname = 'citus'",
            )
            .map_err(R2d2Error::QueryError)?;
        if let Some(timeout) = self.statement_timeout {
            connection
                .batch_execute(&format!(
                    "SET statement_timeout = {}",
                    timeout_millis(timeout)
                ))
                .map_err(R2d2Error::QueryError)?;
        }
        Ok(())
    }
}

/// Applies pending migrations, holding an advisory lock so concurrent starters take turns.
/// Returns the versions applied.
///
/// # Errors
/// [`StoreError::Unavailable`] when the server cannot be reached, [`StoreError::Other`]
/// when a migration fails.
pub fn run_migrations(url: &str) -> Result<Vec<String>, StoreError> {
    migrate(url, None)
}

/// [`run_migrations`] stopping after the migration named `last` (its directory name): the
/// schema as a release that ended there left it, which the upgrade tests then migrate
/// the rest of the way.
///
/// # Errors
/// As [`run_migrations`], and [`StoreError::Other`] when no migration has that name.
pub fn run_migrations_through(url: &str, last: &str) -> Result<Vec<String>, StoreError> {
    let names = embedded_migration_names();
    let position = names
        .iter()
        .position(|name| name == last)
        .ok_or_else(|| StoreError::Other(format!("no migration is named {last}")))?;
    migrate(url, Some(position + 1))
}

/// Applies the pending migrations among the first `count` (all when `None`), each one
/// statement at a time (src/migration_script.rs), then, on a Citus coordinator,
/// distributes the tables they created (crates/postgres/src/citus.rs).
fn migrate(url: &str, count: Option<usize>) -> Result<Vec<String>, StoreError> {
    let mut conn =
        PgConnection::establish(url).map_err(|e| StoreError::Unavailable(e.to_string()))?;
    conn.batch_execute(&format!("SELECT pg_advisory_lock({MIGRATION_LOCK_KEY})"))
        .map_err(store_error)?;
    let failed = |e: Box<dyn std::error::Error + Send + Sync>| {
        StoreError::Other(format!("migration failed: {e}"))
    };
    let applied = pending_migrations(&mut conn, count)
        .map_err(failed)
        .and_then(|applied: Vec<String>| {
            if crate::citus::is_citus(&mut conn)? {
                crate::citus::distribute(&mut conn)?;
            }
            Ok(applied)
        });
    conn.batch_execute(&format!("SELECT pg_advisory_unlock({MIGRATION_LOCK_KEY})"))
        .map_err(store_error)?;
    applied
}

/// Runs the migrations among the first `count` (all when `None`) that `conn` has not
/// applied, in order; returns their versions.
fn pending_migrations(
    conn: &mut PgConnection,
    count: Option<usize>,
) -> diesel::migration::Result<Vec<String>> {
    let mut migrations = MigrationSource::<diesel::pg::Pg>::migrations(&MIGRATIONS)?;
    migrations.sort_by(|a, b| a.name().version().cmp(&b.name().version()));
    let applied = conn.applied_migrations()?;
    let mut ran = Vec::new();
    for migration in migrations.iter().take(count.unwrap_or(usize::MAX)) {
        let version = migration.name().version();
        if applied.contains(&version) {
            continue;
        }
        let name = migration.name().to_string();
        let up = crate::migration_script::up_script(&name)
            .ok_or_else(|| format!("migration {name} has no up.sql in this build"))?;
        conn.run_migration(&crate::migration_script::OneStatementAtATime {
            migration: migration.as_ref(),
            up,
        })?;
        ran.push(version.to_string());
    }
    Ok(ran)
}

/// The names of the migrations this build carries (embedded when the crate compiled), in
/// order. A test database template is named after them as well as after the files: a
/// binary built before a migration was added must not fill a template named for the files
/// that include it.
pub fn embedded_migration_names() -> Vec<String> {
    MigrationSource::<diesel::pg::Pg>::migrations(&MIGRATIONS)
        .map(|migrations| migrations.iter().map(|m| m.name().to_string()).collect())
        .unwrap_or_default()
}

/// Creates the database named in `url` when the server says it does not exist, by
/// connecting to the server's `postgres` maintenance database. Returns whether it created.
///
/// # Errors
/// [`StoreError::Unavailable`] when the server cannot be reached at all.
pub fn ensure_database_exists(url: &str) -> Result<bool, StoreError> {
    match PgConnection::establish(url) {
        Ok(_) => Ok(false),
        Err(error) if error.to_string().contains("does not exist") => {
            let (maintenance_url, name) = split_database(url).ok_or_else(|| {
                StoreError::Other(format!("cannot find the database name in {url}"))
            })?;
            let mut conn = PgConnection::establish(&maintenance_url)
                .map_err(|e| StoreError::Unavailable(e.to_string()))?;
            let quoted = name.replace('"', "\"\"");
            match conn.batch_execute(&format!("CREATE DATABASE \"{quoted}\"")) {
                Ok(()) => Ok(true),
                // Another process created it between our two connections.
                Err(e) if e.to_string().contains("already exists") => Ok(false),
                Err(e) => Err(store_error(e)),
            }
        }
        Err(error) => Err(StoreError::Unavailable(error.to_string())),
    }
}

/// The same server URL naming database `name` instead (query parameters kept).
pub fn url_with_database(url: &str, name: &str) -> Option<String> {
    let (head, _, query) = url_parts(url)?;
    Some(format!("{head}/{name}{query}"))
}

/// Splits `postgres://host/dbname?x` into (`postgres://host/postgres?x`, `dbname`).
fn split_database(url: &str) -> Option<(String, String)> {
    let (head, name, query) = url_parts(url)?;
    Some((format!("{head}/postgres{query}"), name))
}

/// Splits a URL into (scheme and authority, database name, `?query` or empty).
fn url_parts(url: &str) -> Option<(String, String, String)> {
    let scheme_end = url.find("://")? + 3;
    let slash = scheme_end + url[scheme_end..].find('/')?;
    let (name, query) = match url[slash + 1..].split_once('?') {
        Some((name, query)) => (name, format!("?{query}")),
        None => (&url[slash + 1..], String::new()),
    };
    if name.is_empty() {
        return None;
    }
    Some((url[..slash].to_owned(), name.to_owned(), query))
}

#[cfg(test)]
mod tests {
    use super::split_database;

    #[test]
    fn splits_database_name_from_url() {
        assert_eq!(
            split_database("postgres://u@127.0.0.1:5432/mailroom?sslmode=disable"),
            Some((
                "postgres://u@127.0.0.1:5432/postgres?sslmode=disable".into(),
                "mailroom".into()
            ))
        );
        assert_eq!(split_database("postgres://h"), None);
        assert_eq!(
            super::url_with_database("postgres://u@h:1/a?x=1", "b").as_deref(),
            Some("postgres://u@h:1/b?x=1")
        );
        assert_eq!(
            super::url_with_database("postgres://postgres@h/postgres", "b").as_deref(),
            Some("postgres://postgres@h/b")
        );
        assert_eq!(split_database("postgres://h/"), None);
    }
}
