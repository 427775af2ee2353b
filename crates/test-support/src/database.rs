use std::{fs, path::Path, thread, time::Duration};

use diesel::{connection::SimpleConnection, pg::PgConnection, Connection};
use mailroom_app::ports::Database;
use mailroom_postgres::{
    embedded_migration_names, run_migrations, url_with_database, PgDatabase, PoolSettings,
};
use sha2::{Digest, Sha256};

/// Prefix of every per-test database; `cargo xtask test` drops leftovers by it.
pub const TEST_DATABASE_PREFIX: &str = "mailroom_test_";
const TEMPLATE_PREFIX: &str = "mailroom_template_";
/// Changed whenever the making of a template on Citus changes, so templates made the old
/// way are not reused.
const CITUS_TEMPLATE_RECIPE: &str =
    "citus template: distributed, 8 shards, no database object, no connections";
/// Serialises template creation across test processes (nextest runs one per test).
const TEMPLATE_LOCK_KEY: i64 = 0x6d72_7465_6d70_6c74;

/// The maintenance URL tests create databases through: `DATABASE_URL`, or the local
/// server on 127.0.0.1:5432.
pub fn admin_url() -> String {
    std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// A database of its own for one test, dropped (forcibly) when the value is dropped
/// (unless it was opened with [`TestDatabase::kept`]).
pub struct TestDatabase {
    url: String,
    name: String,
    admin_url: String,
    keep: bool,
}

impl TestDatabase {
    /// Clones a fresh database from the migrated template, creating the template first if
    /// this migration set has none yet.
    ///
    /// # Panics
    /// When PostgreSQL is unreachable or a migration fails: the test cannot run.
    pub fn create() -> Self {
        let admin_url = admin_url();
        let template = ensure_template(&admin_url);
        let name = format!("{TEST_DATABASE_PREFIX}{}", uuid::Uuid::now_v7().simple());
        // On Citus the workers' copies first: the coordinator's copy names them.
        for node in citus_workers().iter().chain(std::iter::once(&admin_url)) {
            clone_template(node, &template, &name);
        }
        if on_citus() {
            // Every statement of the service that reads or writes more than one shard
            // fails, unless the code says it fans out (`citus::fan_out` in the adapter).
            // Database settings are not copied from a template, so each test's database
            // gets it here; the test's own connections turn it off.
            connect(&admin_url)
                .batch_execute(&format!(
                    "ALTER DATABASE \"{name}\" SET citus.multi_task_query_log_level = 'error'"
                ))
                .expect("the multi-shard guard");
        }
        let url = without_tls(
            url_with_database(&admin_url, &name).expect("DATABASE_URL names a database"),
        );
        Self {
            url,
            name,
            admin_url,
            keep: false,
        }
    }

    /// A database with no migrations applied (on Citus, on every node and with the
    /// workers registered): a test that migrates it itself, in steps.
    ///
    /// # Panics
    /// When PostgreSQL is unreachable.
    pub fn create_empty() -> Self {
        Self::made_by(create_cluster_database)
    }

    /// A database of a new test name on `DATABASE_URL`'s server, made by `make` (from the
    /// admin URL and the name, answering the database's URL).
    fn made_by(make: fn(&str, &str) -> String) -> Self {
        let admin_url = admin_url();
        let name = format!("{TEST_DATABASE_PREFIX}{}", uuid::Uuid::now_v7().simple());
        let url = without_tls(make(&admin_url, &name));
        Self {
            url,
            name,
            admin_url,
            keep: false,
        }
    }

    /// A database whose coordinator copy is plain (on the workers with the extension):
    /// a benchmark that fills it on one server and then makes it the cluster's with
    /// [`register_citus_workers`] and `mailroom migrate`, which converts it.
    ///
    /// # Panics
    /// When PostgreSQL is unreachable.
    pub fn create_unregistered() -> Self {
        Self::made_by(create_unregistered)
    }

    /// [`TestDatabase::create`] on the server of `admin_url` rather than `DATABASE_URL`'s:
    /// a test that runs a PostgreSQL of its own (one it stops, crashes and restarts). A
    /// plain PostgreSQL server: the Citus workers of `DATABASE_URL` are not involved.
    ///
    /// # Panics
    /// When that server is unreachable or a migration fails.
    pub fn create_on(admin_url: &str) -> Self {
        let template = ensure_template(admin_url);
        let name = format!("{TEST_DATABASE_PREFIX}{}", uuid::Uuid::now_v7().simple());
        clone_template(admin_url, &template, &name);
        let url = without_tls(
            url_with_database(admin_url, &name).expect("the admin URL names a database"),
        );
        Self {
            url,
            name,
            admin_url: admin_url.to_owned(),
            keep: false,
        }
    }

    /// A database kept between runs (a benchmark's generated data): `{prefix}{label}_` and
    /// the migrations' fingerprint, so changed migrations get a new one. Returns it and
    /// whether it existed already; a new one is cloned from the template. It is not
    /// dropped with the value: [`TestDatabase::drop_now`] drops it.
    ///
    /// # Panics
    /// When PostgreSQL is unreachable or a migration fails.
    pub fn kept(prefix: &str, label: &str) -> (Self, bool) {
        let admin_url = admin_url();
        let template = ensure_template(&admin_url);
        let name = format!("{prefix}{label}_{}", migrations_fingerprint());
        let mut admin = connect(&admin_url);
        let existed = template_exists(&mut admin, &name);
        if !existed {
            admin
                .batch_execute(&format!(
                    "CREATE DATABASE \"{name}\" TEMPLATE \"{template}\""
                ))
                .unwrap_or_else(|error| panic!("creating database {name}: {error}"));
        }
        let url = without_tls(
            url_with_database(&admin_url, &name).expect("DATABASE_URL names a database"),
        );
        let database = Self {
            url,
            name,
            admin_url,
            keep: true,
        };
        (database, existed)
    }

    /// Drops the database now, kept or not.
    pub fn drop_now(mut self) {
        self.keep = false;
    }

    /// On Citus, adds the spare node to this database's cluster (its copy of the database
    /// with the extension first) and returns its (host, port); shards move to it only
    /// when a rebalance says so.
    ///
    /// # Panics
    /// Off Citus, or when a node cannot be reached.
    pub fn add_spare_node(&self) -> (String, u16) {
        let spare = citus_spare().expect("MAILROOM_CITUS_SPARE names the spare node");
        connect(&spare)
            .batch_execute(&format!("CREATE DATABASE \"{}\"", self.name))
            .expect("creating the database on the spare node");
        connect(&url_with_database(&spare, &self.name).expect("a spare URL"))
            .batch_execute("CREATE EXTENSION citus")
            .expect("the citus extension on the spare node");
        let (host, port) = host_and_port(&spare);
        self.connection()
            .batch_execute(&format!("SELECT citus_add_node('{host}', {port})"))
            .expect("citus_add_node for the spare node");
        (host, port)
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The connection URL of this test's database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A direct connection, for assertions on stored rows.
    ///
    /// # Panics
    /// When the database cannot be reached.
    pub fn connection(&self) -> PgConnection {
        assertion_connection(&self.url)
    }

    /// The adapter's pool of one connection to this database, connected now. Tests that
    /// read a table's statistics do their work on one and drop it: a backend sends its
    /// statistics when it goes idle, at once only if it last sent them more than a second
    /// before (else 10 s later, PostgreSQL 15+).
    ///
    /// # Panics
    /// When the database cannot be reached.
    pub fn pool_of_one(&self) -> PgDatabase {
        let pool = PgDatabase::connect(
            &self.url,
            &PoolSettings {
                max_size: 1,
                ..PoolSettings::default()
            },
        )
        .expect("pool");
        pool.check_health().expect("connected");
        pool
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        let nodes = std::iter::once(self.admin_url.clone())
            .chain(citus_workers())
            .chain(citus_spare());
        for node in nodes {
            if let Ok(mut admin) = PgConnection::establish(&node) {
                // On Citus a test that ended mid-commit can leave its two-phase commits
                // prepared on the workers; nothing would resolve them once the database is
                // gone, and a prepared transaction holds back every shard move on that
                // node (a replication slot waits for it). They go first.
                roll_back_prepared(&node, &self.name);
                // Leftovers from a failed drop are removed by `cargo xtask test` at the
                // next run.
                let _ = admin.batch_execute(&format!(
                    "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
                    self.name
                ));
            }
        }
    }
}

/// Rolls back the transactions left prepared in database `name` of the node whose
/// maintenance URL is `node_url` (none off Citus, or after a clean test).
fn roll_back_prepared(node_url: &str, name: &str) {
    use diesel::{sql_types::Text, QueryableByName, RunQueryDsl};
    #[derive(QueryableByName)]
    struct Prepared {
        #[diesel(sql_type = Text)]
        gid: String,
    }
    let Ok(mut admin) = PgConnection::establish(node_url) else {
        return;
    };
    let prepared: Vec<Prepared> =
        diesel::sql_query("SELECT gid FROM pg_prepared_xacts WHERE database = $1")
            .bind::<Text, _>(name)
            .load(&mut admin)
            .unwrap_or_default();
    if prepared.is_empty() {
        return;
    }
    let Some(url) = url_with_database(node_url, name) else {
        return;
    };
    if let Ok(mut conn) = PgConnection::establish(&url) {
        for Prepared { gid } in prepared {
            let _ = conn.batch_execute(&format!("ROLLBACK PREPARED '{}'", gid.replace('\'', "''")));
        }
    }
}

/// The maintenance URLs of the Citus workers when the tests run on a Citus cluster
/// (`cargo xtask test --citus` sets `MAILROOM_CITUS_WORKERS`; `DATABASE_URL` is then the
/// coordinator's), else none.
pub fn citus_workers() -> Vec<String> {
    std::env::var("MAILROOM_CITUS_WORKERS")
        .map(|urls| {
            urls.split(',')
                .filter(|url| !url.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The spare Citus node's maintenance URL (`MAILROOM_CITUS_SPARE`): a node in no
/// database's cluster until a test adds it ([`TestDatabase::add_spare_node`]).
pub fn citus_spare() -> Option<String> {
    std::env::var("MAILROOM_CITUS_SPARE")
        .ok()
        .filter(|url| !url.is_empty())
}

/// A connection for a test's own statements (setting rows up, assertions): on Citus
/// without the multi-shard guard the service's sessions run under, since a test may read
/// every shard.
///
/// # Panics
/// When the database cannot be reached.
pub fn assertion_connection(url: &str) -> PgConnection {
    let mut conn = connect(url);
    if on_citus() {
        conn.batch_execute("SET citus.multi_task_query_log_level = 'off'")
            .expect("the multi-shard guard off for the test's connection");
    }
    conn
}

/// Whether the tests run on a Citus cluster.
pub fn on_citus() -> bool {
    !citus_workers().is_empty()
}

/// `CREATE DATABASE name TEMPLATE template` on one node. It fails while another session
/// is connected to the template: during the brief template build, or (on Citus) its
/// maintenance daemon, which a connection to the template starts; so end those and retry.
fn clone_template(node_url: &str, template: &str, name: &str) {
    let mut admin = connect(node_url);
    let mut attempt = 0;
    loop {
        match admin.batch_execute(&format!(
            "CREATE DATABASE \"{name}\" TEMPLATE \"{template}\""
        )) {
            Ok(()) => return,
            Err(error) if attempt < 50 && error.to_string().contains("being accessed") => {
                attempt += 1;
                end_sessions_of_template(&mut admin, template);
                thread::sleep(Duration::from_millis(100));
            }
            Err(error) => panic!("creating test database {name}: {error}"),
        }
    }
}

/// Ends the sessions Citus keeps in a template: its maintenance daemon, and on a worker
/// the coordinator's connections to its copy. No test connects to a template.
fn end_sessions_of_template(admin: &mut PgConnection, template: &str) {
    let _ = admin.batch_execute(&format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = '{template}' AND pid <> pg_backend_pid()"
    ));
}

/// Test databases are on loopback: no TLS. Besides being pointless there, libpq's TLS layer
/// can crash a process that exits while a pool thread is still connecting (seen as a
/// SIGSEGV after a test's last assertion), which would make tests flaky.
fn without_tls(url: String) -> String {
    if url.contains("sslmode=") {
        url
    } else if url.contains('?') {
        format!("{url}&sslmode=disable")
    } else {
        format!("{url}?sslmode=disable")
    }
}

fn connect(url: &str) -> PgConnection {
    PgConnection::establish(url).unwrap_or_else(|e| panic!("connecting to PostgreSQL ({url}): {e}"))
}

/// The template's name carries a hash of the migrations, so a changed migration gets a
/// new template instead of a stale one: of the files, and of the names of the migrations
/// the binary embeds, so a test binary built before a migration was added (and which
/// would not apply it) never fills the template named for the files that include it.
fn ensure_template(admin_url: &str) -> String {
    let name = format!("{TEMPLATE_PREFIX}{}", migrations_fingerprint());
    let mut admin = connect(admin_url);
    admin
        .batch_execute(&format!("SELECT pg_advisory_lock({TEMPLATE_LOCK_KEY})"))
        .expect("template lock");
    let exists = template_exists(&mut admin, &name);
    if !exists {
        let building = format!("{name}_building");
        // Two statements: DROP/CREATE DATABASE refuse to run inside one implicit transaction.
        admin
            .batch_execute(&format!(
                "DROP DATABASE IF EXISTS \"{building}\" WITH (FORCE)"
            ))
            .expect("dropping a half-built template");
        let workers = citus_workers();
        let building_url = create_cluster_database(admin_url, &building);
        run_migrations(&building_url).unwrap_or_else(|e| panic!("migrating the template: {e}"));
        // Citus records the database itself among its distributed objects, by the
        // template's oid; in a clone that row would name the template, and a node added
        // to the clone later (the live-operation tests) would be told of a database of
        // that name. The clones need no such row.
        let citus_nodes = if workers.is_empty() {
            Vec::new()
        } else {
            workers
                .iter()
                .chain(std::iter::once(&admin_url.to_owned()))
                .cloned()
                .collect()
        };
        for node in &citus_nodes {
            connect(&url_with_database(node, &building).expect("a node URL"))
                .batch_execute(
                    "DELETE FROM pg_catalog.pg_dist_object \
                     WHERE classid = 'pg_catalog.pg_database'::regclass",
                )
                .expect("forgetting the template's own database object");
        }
        // The coordinator first: its maintenance daemon holds connections to the
        // workers' copies.
        for node in std::iter::once(&admin_url.to_owned()).chain(&workers) {
            let mut node = connect(node);
            let mut attempt = 0;
            loop {
                end_sessions_of_template(&mut node, &building);
                // A finished template takes no connections, as template0: on Citus a
                // maintenance daemon (and, from the coordinator's, connections to each
                // worker's copy) would otherwise come back to it after every clone, and
                // each clone would wait for them to be ended again.
                match node.batch_execute(&format!(
                    "ALTER DATABASE \"{building}\" RENAME TO \"{name}\"; \
                     ALTER DATABASE \"{name}\" WITH ALLOW_CONNECTIONS false"
                )) {
                    Ok(()) => break,
                    Err(error) if attempt < 50 && error.to_string().contains("being accessed") => {
                        attempt += 1;
                        thread::sleep(Duration::from_millis(100));
                    }
                    Err(error) => panic!("renaming the template: {error}"),
                }
            }
        }
    }
    admin
        .batch_execute(&format!("SELECT pg_advisory_unlock({TEMPLATE_LOCK_KEY})"))
        .expect("template unlock");
    name
}

/// An empty database named `name` on the server of `admin_url`; on Citus on every node,
/// with the extension, and the workers registered on the coordinator's copy. Returns its
/// URL.
fn create_cluster_database(admin_url: &str, name: &str) -> String {
    let url = create_unregistered(admin_url, name);
    if on_citus() {
        register_citus_workers(&url);
        few_shards(&url);
    }
    url
}

/// A database named `name` on every node: on the workers with the extension, on the
/// coordinator without it (a plain database until [`register_citus_workers`]).
fn create_unregistered(admin_url: &str, name: &str) -> String {
    for worker in &citus_workers() {
        let mut node = connect(worker);
        node.batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
            .and_then(|()| node.batch_execute(&format!("CREATE DATABASE \"{name}\"")))
            .expect("creating a database on a Citus worker");
        connect(&url_with_database(worker, name).expect("a worker URL"))
            .batch_execute("CREATE EXTENSION citus")
            .expect("the citus extension on a worker");
    }
    connect(admin_url)
        .batch_execute(&format!("CREATE DATABASE \"{name}\""))
        .expect("creating a database");
    url_with_database(admin_url, name).expect("DATABASE_URL names a database")
}

/// The coordinator's half of a Citus database: the extension, the coordinator's own
/// address and the workers of [`citus_workers`].
///
/// # Panics
/// When a node cannot be reached or Citus refuses.
pub fn register_citus_workers(coordinator_url: &str) {
    let (host, port) = host_and_port(coordinator_url);
    let mut conn = connect(coordinator_url);
    conn.batch_execute("CREATE EXTENSION citus")
        .expect("the citus extension on the coordinator");
    conn.batch_execute(&format!(
        "SELECT citus_set_coordinator_host('{host}', {port})"
    ))
    .expect("citus_set_coordinator_host");
    for worker in citus_workers() {
        let (host, port) = host_and_port(&worker);
        let add = format!("SELECT citus_add_node('{host}', {port})");
        // Adding a node opens a connection to it that Citus marks essential; when dozens
        // of tests create their databases at once, one such connection may fail. The
        // statement leaves nothing behind when it fails, so it is tried again.
        let mut attempt = 1;
        while let Err(error) = conn.batch_execute(&add) {
            assert!(attempt < 5, "citus_add_node: {error:?}");
            thread::sleep(Duration::from_millis(500 * attempt));
            attempt += 1;
        }
    }
}

/// Few shards (8 a table): a test's data is small, and a database's copy on every node is
/// as many files as it has shards.
fn few_shards(coordinator_url: &str) {
    let database: String = coordinator_url
        .rsplit('/')
        .next()
        .and_then(|rest| rest.split('?').next())
        .unwrap_or_default()
        .to_owned();
    connect(coordinator_url)
        .batch_execute(&format!(
            "ALTER DATABASE \"{database}\" SET citus.shard_count = 8"
        ))
        .expect("setting the shard count");
}

/// `postgres://user@host:port/db` → (host, port).
pub fn host_and_port(url: &str) -> (String, u16) {
    let authority = url
        .split("://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    match host_port.rsplit_once(':') {
        Some((host, port)) => (host.to_owned(), port.parse().unwrap_or(5432)),
        None => (host_port.to_owned(), 5432),
    }
}

fn template_exists(admin: &mut PgConnection, name: &str) -> bool {
    use diesel::{sql_types::Text, QueryableByName, RunQueryDsl};
    #[derive(QueryableByName)]
    struct Found {
        #[diesel(sql_type = Text)]
        #[allow(dead_code)]
        datname: String,
    }
    diesel::sql_query("SELECT datname FROM pg_database WHERE datname = $1")
        .bind::<Text, _>(name)
        .load::<Found>(admin)
        .map(|rows| !rows.is_empty())
        .expect("listing databases")
}

fn migrations_fingerprint() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations");
    let mut files = Vec::new();
    collect_files(&root, &mut files);
    files.sort();
    let mut hasher = Sha256::new();
    // How a template is made on Citus (distribution, what is removed from its catalog)
    // is part of what it is: a change here makes new templates.
    if on_citus() {
        hasher.update(CITUS_TEMPLATE_RECIPE.as_bytes());
    }
    for name in embedded_migration_names() {
        hasher.update(name.as_bytes());
        hasher.update(b"\n");
    }
    for file in files {
        hasher.update(
            file.strip_prefix(&root)
                .unwrap_or(&file)
                .to_string_lossy()
                .as_bytes(),
        );
        hasher.update(fs::read(&file).unwrap_or_default());
    }
    hex::encode(&hasher.finalize()[..6])
}

fn collect_files(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_files(&path, files);
        } else {
            files.push(path);
        }
    }
}

/// A table's row updates and how many of them were heap-only (HOT), as PostgreSQL's
/// statistics have them (`pg_stat_user_tables`). Tests of writes meant to touch no index
/// compare two readings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, diesel::QueryableByName)]
pub struct RowUpdates {
    /// Row updates.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub updated: i64,
    /// Of which heap-only.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub heap_only: i64,
}

impl RowUpdates {
    /// `table`'s reading now.
    ///
    /// # Panics
    /// When the statistics cannot be read.
    pub fn of(conn: &mut PgConnection, table: &str) -> Self {
        use diesel::RunQueryDsl;
        diesel::sql_query(
            "SELECT n_tup_upd AS updated, n_tup_hot_upd AS heap_only FROM pg_stat_user_tables \
             WHERE relname = $1",
        )
        .bind::<diesel::sql_types::Text, _>(table)
        .get_result(conn)
        .expect("statistics")
    }

    /// `table`'s reading once it counts at least `updates` more updates than `self`, or
    /// after 30 s: a backend sends its statistics when it goes idle, at most once a
    /// second.
    pub fn after(self, conn: &mut PgConnection, table: &str, updates: i64) -> Self {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let now = Self::of(conn, table);
            if now.updated - self.updated >= updates || std::time::Instant::now() > deadline {
                return now;
            }
            thread::sleep(Duration::from_millis(100));
        }
    }
}
