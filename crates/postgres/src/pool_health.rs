//! Failing fast while PostgreSQL is unreachable.
//!
//! r2d2's `get()` waits the whole connection timeout for a connection even when every
//! attempt to open one is refused at once, so during an outage each request would hang
//! for that long before answering 503 (and clients with a shorter timeout would see a
//! hang). The pool's error handler and connection customiser report here whether the
//! latest attempt to connect failed; while it did, a checkout gives up after a short wait
//! instead. A busy but healthy pool still waits the full timeout.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use diesel::{
    pg::PgConnection,
    r2d2::{
        ConnectionManager, CustomizeConnection, Error as R2d2Error, HandleError, Pool,
        PooledConnection,
    },
};

/// How long one slice of a checkout waits before looking at the connection health again.
const SLICE: Duration = Duration::from_millis(100);

/// Whether the latest attempt to open a connection failed, and since when.
#[derive(Debug, Default)]
pub(crate) struct ConnectHealth {
    state: Mutex<HealthState>,
}

#[derive(Debug, Default)]
struct HealthState {
    /// The last failed attempt when no attempt has succeeded since.
    failing_since: Option<Instant>,
    last_failure: Option<Instant>,
}

impl ConnectHealth {
    fn failed(&self, error: &R2d2Error) {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        if state.failing_since.is_none() {
            // Logged once per outage; requests log their own 503s.
            tracing::warn!(%error, "cannot connect to PostgreSQL; answering 503 until it is back");
            state.failing_since = Some(now);
        }
        state.last_failure = Some(now);
    }

    fn succeeded(&self) {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(since) = state.failing_since.take() {
            tracing::info!(down_for = ?since.elapsed(), "connected to PostgreSQL again");
        }
    }

    /// Whether an attempt failed within `recent` and none has succeeded since.
    fn failing(&self, recent: Duration) -> bool {
        let state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        state.failing_since.is_some() && state.last_failure.is_some_and(|at| at.elapsed() < recent)
    }
}

/// Reports failed connection attempts to [`ConnectHealth`].
#[derive(Debug)]
pub(crate) struct ReportFailures(pub(crate) Arc<ConnectHealth>);

impl HandleError<R2d2Error> for ReportFailures {
    fn handle_error(&self, error: R2d2Error) {
        self.0.failed(&error);
    }
}

/// Reports opened connections to [`ConnectHealth`].
#[derive(Debug)]
pub(crate) struct ReportSuccess(pub(crate) Arc<ConnectHealth>);

impl CustomizeConnection<PgConnection, R2d2Error> for ReportSuccess {
    fn on_acquire(&self, _connection: &mut PgConnection) -> Result<(), R2d2Error> {
        self.0.succeeded();
        Ok(())
    }
}

/// A connection within `timeout`, or sooner an error when connecting is failing.
pub(crate) fn checkout(
    pool: &Pool<ConnectionManager<PgConnection>>,
    health: &ConnectHealth,
    timeout: Duration,
) -> Result<PooledConnection<ConnectionManager<PgConnection>>, String> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match pool.get_timeout(left.min(SLICE)) {
            Ok(connection) => return Ok(connection),
            Err(error) => {
                if health.failing(timeout) {
                    return Err(format!("cannot connect to the database: {error}"));
                }
                if Instant::now() >= deadline {
                    return Err(format!(
                        "no database connection within {timeout:?}: {error}"
                    ));
                }
            }
        }
    }
}
