//! Live SMTP connections kept per mail server between messages, with a bound on
//! concurrent sessions and an optional pace (messages per second) per server.
//!
//! A connection is checked out for one message and checked back in after it. Checkout
//! never probes the connection (no `NOOP` per message, which would cost a round trip
//! each): a connection the server closed meanwhile shows up as a failure at `MAIL FROM`,
//! before the server could have taken anything, and the mailer then retries once on a
//! fresh connection. Connections older than the age limit, idle longer than the idle
//! limit, or with enough messages behind them are closed instead of reused.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use lettre::transport::smtp::client::AsyncSmtpConnection;
use mailroom_app::ports::{SmtpEndpoint, SmtpSecurity};
use tokio::sync::Semaphore;
use tokio::time::{timeout, Instant};

/// How long a connection being closed may take to answer `QUIT`.
const QUIT_TIMEOUT: Duration = Duration::from_secs(2);

/// Limits of the connection pool, per mail server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SmtpPoolSettings {
    /// The most SMTP sessions open to one server at once
    /// (`MAILROOM_SMTP_CONNECTIONS_PER_SERVER`).
    pub max_connections: usize,
    /// The most messages handed to one server per second (`MAILROOM_SMTP_RATE_LIMIT`);
    /// `None` is unlimited. Messages are spaced evenly (a token bucket of depth one), so
    /// no burst ever exceeds the provider's rate.
    pub messages_per_second: Option<f64>,
    /// A connection idle longer than this is closed rather than reused; servers close
    /// idle sessions themselves after a while (Postfix after 300 s, many providers
    /// sooner).
    pub idle_timeout: Duration,
    /// A connection older than this is closed after its current message.
    pub max_age: Duration,
    /// A connection is closed after this many messages (providers cap messages per
    /// session).
    pub max_messages: u32,
}

impl Default for SmtpPoolSettings {
    fn default() -> Self {
        Self {
            max_connections: 8,
            messages_per_second: None,
            idle_timeout: Duration::from_secs(20),
            max_age: Duration::from_secs(300),
            max_messages: 1_000,
        }
    }
}

/// What identifies one server's connections: a connection is authenticated as one user
/// and secured one way.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PoolKey {
    host: String,
    port: u16,
    security: SmtpSecurityKey,
    allow_insecure_tls: bool,
    user: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum SmtpSecurityKey {
    Implicit,
    Required,
    Opportunistic,
}

impl PoolKey {
    pub(crate) fn of(endpoint: &SmtpEndpoint) -> Self {
        Self {
            host: endpoint.host.trim().to_ascii_lowercase(),
            port: endpoint.port,
            security: match endpoint.security {
                SmtpSecurity::ImplicitTls => SmtpSecurityKey::Implicit,
                SmtpSecurity::StartTlsRequired => SmtpSecurityKey::Required,
                SmtpSecurity::StartTlsOpportunistic => SmtpSecurityKey::Opportunistic,
            },
            allow_insecure_tls: endpoint.allow_insecure_tls,
            user: endpoint.user.clone(),
        }
    }
}

/// A live, authenticated session, idle between messages.
pub(crate) struct Pooled {
    pub(crate) connection: AsyncSmtpConnection,
    opened: Instant,
    last_used: Instant,
    messages: u32,
}

impl Pooled {
    pub(crate) fn new(connection: AsyncSmtpConnection) -> Self {
        let now = Instant::now();
        Self {
            connection,
            opened: now,
            last_used: now,
            messages: 0,
        }
    }

    fn usable(&self, settings: &SmtpPoolSettings, now: Instant) -> bool {
        !self.connection.has_broken()
            && now.duration_since(self.opened) < settings.max_age
            && now.duration_since(self.last_used) < settings.idle_timeout
            && self.messages < settings.max_messages
    }
}

/// One server's connections, session permits and pace.
pub(crate) struct ServerPool {
    /// One permit per session; held from checkout to checkin, so connections (idle or
    /// busy) never outnumber `max_connections`.
    pub(crate) permits: Semaphore,
    idle: Mutex<Vec<Pooled>>,
    /// The earliest instant the next message may start, when a rate is set.
    next_slot: Mutex<Option<Instant>>,
}

impl ServerPool {
    fn new(settings: &SmtpPoolSettings) -> Self {
        Self {
            permits: Semaphore::new(settings.max_connections.max(1)),
            idle: Mutex::new(Vec::new()),
            next_slot: Mutex::new(None),
        }
    }

    /// Waits for this message's turn under the server's rate (reserving the slot first,
    /// so concurrent senders queue up rather than race).
    pub(crate) async fn pace(&self, settings: &SmtpPoolSettings) {
        let Some(rate) = settings.messages_per_second.filter(|rate| *rate > 0.0) else {
            return;
        };
        let interval = Duration::from_secs_f64(1.0 / rate);
        let slot = {
            let mut next = lock(&self.next_slot);
            let now = Instant::now();
            let slot = next.map_or(now, |next| next.max(now));
            *next = Some(slot + interval);
            slot
        };
        tokio::time::sleep_until(slot).await;
    }

    /// The most recently used live connection, if any; stale ones met on the way are
    /// closed in the background.
    pub(crate) fn checkout(&self, settings: &SmtpPoolSettings) -> Option<Pooled> {
        let now = Instant::now();
        let mut stale = Vec::new();
        let found = {
            let mut idle = lock(&self.idle);
            let mut found = None;
            while let Some(pooled) = idle.pop() {
                if pooled.usable(settings, now) {
                    found = Some(pooled);
                    break;
                }
                stale.push(pooled);
            }
            found
        };
        close_all(stale);
        found
    }

    /// Returns a connection after a message it completed (accepted or refused with the
    /// transaction reset), unless it reached a limit.
    pub(crate) fn checkin(&self, mut pooled: Pooled, settings: &SmtpPoolSettings) {
        let now = Instant::now();
        pooled.last_used = now;
        pooled.messages = pooled.messages.saturating_add(1);
        if pooled.usable(settings, now) {
            lock(&self.idle).push(pooled);
        } else {
            close_all(vec![pooled]);
        }
    }

    fn reap(&self, settings: &SmtpPoolSettings) {
        let now = Instant::now();
        let stale = {
            let mut idle = lock(&self.idle);
            let (keep, stale): (Vec<_>, Vec<_>) = idle
                .drain(..)
                .partition(|pooled| pooled.usable(settings, now));
            *idle = keep;
            stale
        };
        close_all(stale);
    }

    #[cfg(test)]
    fn idle_count(&self) -> usize {
        lock(&self.idle).len()
    }
}

/// Every server's pool.
pub(crate) struct Pools {
    settings: SmtpPoolSettings,
    servers: Mutex<HashMap<PoolKey, Arc<ServerPool>>>,
}

impl Pools {
    pub(crate) fn new(settings: SmtpPoolSettings) -> Arc<Self> {
        Arc::new(Self {
            settings,
            servers: Mutex::new(HashMap::new()),
        })
    }

    pub(crate) fn settings(&self) -> &SmtpPoolSettings {
        &self.settings
    }

    /// The pool of `endpoint`'s server. The first pool created starts a task that closes
    /// idle connections past their limits, so a quiet server is not held open.
    pub(crate) fn server(self: &Arc<Self>, endpoint: &SmtpEndpoint) -> Arc<ServerPool> {
        let key = PoolKey::of(endpoint);
        let mut servers = lock(&self.servers);
        if servers.is_empty() {
            start_reaper(Arc::downgrade(self));
        }
        Arc::clone(
            servers
                .entry(key)
                .or_insert_with(|| Arc::new(ServerPool::new(&self.settings))),
        )
    }

    fn reap(&self) {
        let servers: Vec<Arc<ServerPool>> = lock(&self.servers).values().cloned().collect();
        for server in servers {
            server.reap(&self.settings);
        }
    }
}

/// Runs while the pools live (it holds them weakly), on the runtime of the first send.
fn start_reaper(pools: Weak<Pools>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        loop {
            let period = match pools.upgrade() {
                Some(pools) => (pools.settings.idle_timeout / 2).max(Duration::from_millis(100)),
                None => return,
            };
            tokio::time::sleep(period).await;
            match pools.upgrade() {
                Some(pools) => pools.reap(),
                None => return,
            }
        }
    });
}

/// Says `QUIT` on each connection in the background (bounded), then drops it.
pub(crate) fn close_all(connections: Vec<Pooled>) {
    if connections.is_empty() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        for mut pooled in connections {
            let _ = timeout(QUIT_TIMEOUT, pooled.connection.abort()).await;
        }
    });
}

/// A poisoned lock only means another task panicked while holding it; the data is intact.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_pace_spaces_messages_evenly() {
        let settings = SmtpPoolSettings {
            messages_per_second: Some(20.0),
            ..SmtpPoolSettings::default()
        };
        let pool = ServerPool::new(&settings);
        let started = Instant::now();
        for _ in 0..5 {
            pool.pace(&settings).await;
        }
        // The first goes at once, the next four 50 ms apart.
        let elapsed = started.elapsed();
        assert!(elapsed >= Duration::from_millis(195), "{elapsed:?}");
        assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
        assert_eq!(pool.idle_count(), 0);
    }

    #[tokio::test]
    async fn no_rate_means_no_wait() {
        let settings = SmtpPoolSettings::default();
        let pool = ServerPool::new(&settings);
        let started = Instant::now();
        for _ in 0..100 {
            pool.pace(&settings).await;
        }
        assert!(started.elapsed() < Duration::from_millis(50));
    }
}
