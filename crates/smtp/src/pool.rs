//! Live SMTP connections kept per mail server between messages, with a bound on
//! concurrent sessions and an optional pace (messages per second) per server.
//!
//! A connection is checked out for one message and checked back in after it. Checkout
//! never probes the connection (no `NOOP` per message, which would cost a round trip
//! each): a connection the server closed meanwhile shows up as a failure at `MAIL FROM`,
//! before the server could have taken anything, and the mailer then retries once on a
//! fresh connection. Connections older than the age limit, idle longer than the idle
//! limit, or with enough messages behind them are closed instead of reused.
//!
//! Pools are keyed by account, mail server and a digest of the settings and password
//! ([`PoolKey`]): a session authenticated for one account never carries another's mail,
//! and newer settings of a saved server retire the sessions of the older ones.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use lettre::transport::smtp::client::AsyncSmtpConnection;
use mailroom_app::ports::{SmtpEndpoint, SmtpSecurity};
use mailroom_domain::message::AttemptFault;
use mailroom_domain::{AccountId, MailServerId, Timestamp};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use tokio::time::{timeout, Instant};

/// How long a connection being closed may take to answer `QUIT`.
const QUIT_TIMEOUT: Duration = Duration::from_secs(2);

/// After a server refused Mailroom itself (AUTH), how long further messages for the same
/// settings get that answer without a new connection: a queue of messages must not
/// become a burst of failed logins (providers block addresses for that). New settings
/// (a new key) are tried at once.
pub(crate) const REFUSAL_MEMORY: Duration = Duration::from_secs(30);

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

/// What identifies one server's connections: whose they are (account and mail server,
/// when the settings are a saved server's) and a digest of every connection setting and
/// the credentials. Two accounts with the same provider and user name (SendGrid's
/// `apikey`, Resend's `resend`, a shared relay) never share a session, and a changed
/// password or host never reuses a session opened with the old one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PoolKey {
    owner: Option<(AccountId, MailServerId)>,
    settings: [u8; 32],
}

impl PoolKey {
    pub(crate) fn of(endpoint: &SmtpEndpoint) -> Self {
        let security: u8 = match endpoint.security {
            SmtpSecurity::ImplicitTls => 1,
            SmtpSecurity::StartTlsRequired => 2,
            SmtpSecurity::StartTlsOpportunistic => 3,
        };
        let mut digest = Sha256::new();
        // Length-prefixed fields, so no two different settings hash the same bytes.
        for field in [
            endpoint.host.trim().to_ascii_lowercase().as_bytes(),
            &endpoint.port.to_be_bytes(),
            &[security, u8::from(endpoint.allow_insecure_tls)],
            endpoint.user.as_bytes(),
            endpoint.password.expose().as_bytes(),
        ] {
            digest.update((field.len() as u64).to_be_bytes());
            digest.update(field);
        }
        Self {
            owner: endpoint.saved.map(|saved| (saved.account_id, saved.id)),
            settings: digest.finalize().into(),
        }
    }
}

/// A live, authenticated session, idle between messages.
pub(crate) struct Pooled {
    pub(crate) connection: AsyncSmtpConnection,
    /// The server offered `PIPELINING` (RFC 2920): a transaction's envelope goes in one
    /// write (see [`crate::mailer`]).
    pub(crate) pipelining: bool,
    opened: Instant,
    last_used: Instant,
    messages: u32,
}

impl Pooled {
    pub(crate) fn new(connection: AsyncSmtpConnection, pipelining: bool) -> Self {
        let now = Instant::now();
        Self {
            connection,
            pipelining,
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
    /// Set when newer settings replaced these or the pool left the map: nothing is
    /// checked out of it or kept in it any more.
    retired: AtomicBool,
    /// The server's last refusal of Mailroom itself (AUTH), and when.
    refused: Mutex<Option<(Instant, AttemptFault)>>,
}

impl ServerPool {
    fn new(settings: &SmtpPoolSettings) -> Self {
        Self {
            permits: Semaphore::new(settings.max_connections.max(1)),
            idle: Mutex::new(Vec::new()),
            next_slot: Mutex::new(None),
            retired: AtomicBool::new(false),
            refused: Mutex::new(None),
        }
    }

    /// Closes the idle sessions and makes every busy one close at checkin.
    fn retire(&self) {
        self.retired.store(true, Ordering::SeqCst);
        let idle = std::mem::take(&mut *lock(&self.idle));
        close_all(idle);
    }

    fn is_retired(&self) -> bool {
        self.retired.load(Ordering::SeqCst)
    }

    /// Remembers that the server refused these settings' login.
    pub(crate) fn remember_refusal(&self, fault: AttemptFault) {
        *lock(&self.refused) = Some((Instant::now(), fault));
    }

    /// The refusal to answer without connecting, if one is recent enough.
    pub(crate) fn recent_refusal(&self) -> Option<AttemptFault> {
        let mut refused = lock(&self.refused);
        match &*refused {
            Some((at, fault)) if at.elapsed() < REFUSAL_MEMORY => Some(fault.clone()),
            _ => {
                *refused = None;
                None
            }
        }
    }

    /// Forgets the refusal: a session opened since.
    pub(crate) fn forget_refusal(&self) {
        *lock(&self.refused) = None;
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
        if self.is_retired() {
            return None;
        }
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
        if !pooled.usable(settings, now) {
            close_all(vec![pooled]);
            return;
        }
        let mut idle = lock(&self.idle);
        // Checked under the idle lock, which `retire` takes after setting the flag: a
        // session is either seen by `retire` or closed here, never left behind.
        if self.is_retired() {
            drop(idle);
            close_all(vec![pooled]);
        } else {
            idle.push(pooled);
        }
    }

    /// Closes the idle sessions past their limits; `true` when the pool is then unused
    /// (nothing idle, no session checked out).
    fn reap(&self, settings: &SmtpPoolSettings) -> bool {
        let now = Instant::now();
        let (stale, empty) = {
            let mut idle = lock(&self.idle);
            let (keep, stale): (Vec<_>, Vec<_>) = idle
                .drain(..)
                .partition(|pooled| pooled.usable(settings, now));
            *idle = keep;
            (stale, idle.is_empty())
        };
        close_all(stale);
        empty && self.permits.available_permits() == settings.max_connections.max(1)
    }

    #[cfg(test)]
    fn idle_count(&self) -> usize {
        lock(&self.idle).len()
    }
}

/// Every server's pool.
pub(crate) struct Pools {
    settings: SmtpPoolSettings,
    servers: Mutex<Servers>,
    reaper_started: AtomicBool,
}

#[derive(Default)]
struct Servers {
    pools: HashMap<PoolKey, Arc<ServerPool>>,
    /// Per saved server, the newest settings seen (their `updated_at`) and their key.
    current: HashMap<(AccountId, MailServerId), (Timestamp, PoolKey)>,
}

impl Pools {
    pub(crate) fn new(settings: SmtpPoolSettings) -> Arc<Self> {
        Arc::new(Self {
            settings,
            servers: Mutex::new(Servers::default()),
            reaper_started: AtomicBool::new(false),
        })
    }

    pub(crate) fn settings(&self) -> &SmtpPoolSettings {
        &self.settings
    }

    /// The pool of `endpoint`'s settings. The first pool created starts a task that
    /// closes idle connections past their limits, so a quiet server is not held open.
    ///
    /// The worker learns of a saved server's new settings from the messages it sends
    /// (the API may run in another process): the first message with newer settings
    /// (a later `updated_at`, a new key) retires the older settings' pool at once, its
    /// idle sessions closed and its busy ones closed when their message ends. A message
    /// still carrying older settings than the newest seen (claimed before the save) goes
    /// over a pool of its own that keeps nothing. A deleted server's sessions are closed
    /// by the reaper once idle past the limit.
    pub(crate) fn server(self: &Arc<Self>, endpoint: &SmtpEndpoint) -> Arc<ServerPool> {
        let key = PoolKey::of(endpoint);
        if !self.reaper_started.swap(true, Ordering::SeqCst) {
            start_reaper(Arc::downgrade(self));
        }
        let mut servers = lock(&self.servers);
        if let (Some(owner), Some(saved)) = (key.owner, endpoint.saved) {
            match servers.current.get(&owner).cloned() {
                Some((_, current)) if current == key => {}
                Some((newest, _)) if saved.updated_at <= newest => {
                    let stale = Arc::new(ServerPool::new(&self.settings));
                    stale.retired.store(true, Ordering::SeqCst);
                    return stale;
                }
                previous => {
                    if let Some((_, old)) = previous {
                        if let Some(old) = servers.pools.remove(&old) {
                            old.retire();
                        }
                    }
                    servers
                        .current
                        .insert(owner, (saved.updated_at, key.clone()));
                }
            }
        }
        Arc::clone(
            servers
                .pools
                .entry(key)
                .or_insert_with(|| Arc::new(ServerPool::new(&self.settings))),
        )
    }

    /// Closes idle sessions past their limits and forgets unused pools (a deleted or
    /// quiet server's), retiring them so a sender that still holds one keeps nothing in
    /// it.
    fn reap(&self) {
        let mut servers = lock(&self.servers);
        let unused: Vec<PoolKey> = servers
            .pools
            .iter()
            .filter(|(_, pool)| pool.reap(&self.settings))
            .map(|(key, _)| key.clone())
            .collect();
        for key in unused {
            if let Some(pool) = servers.pools.remove(&key) {
                pool.retire();
            }
            if let Some(owner) = key.owner {
                if servers
                    .current
                    .get(&owner)
                    .is_some_and(|(_, current)| *current == key)
                {
                    servers.current.remove(&owner);
                }
            }
        }
    }

    #[cfg(test)]
    fn pool_count(&self) -> usize {
        lock(&self.servers).pools.len()
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
    use mailroom_app::ports::SavedServer;
    use mailroom_domain::secret::SecretString;

    use super::*;

    fn endpoint(account: u128, server: u128, password: &str, version: &str) -> SmtpEndpoint {
        SmtpEndpoint {
            host: "smtp.sendgrid.net".into(),
            port: 587,
            security: SmtpSecurity::StartTlsRequired,
            allow_insecure_tls: false,
            user: "apikey".into(),
            password: SecretString::new(password),
            saved: Some(SavedServer {
                account_id: AccountId::from_uuid(uuid_of(account)),
                id: MailServerId::from_uuid(uuid_of(server)),
                updated_at: Timestamp::parse(version).expect("timestamp"),
            }),
        }
    }

    fn uuid_of(n: u128) -> mailroom_domain::Uuid {
        mailroom_domain::Uuid::from_u128(n)
    }

    const V1: &str = "2026-11-24T10:00:00.000Z";
    const V2: &str = "2026-11-24T11:00:00.000Z";

    #[test]
    fn accounts_sharing_a_user_name_never_share_a_key() {
        let ann = PoolKey::of(&endpoint(1, 10, "key-of-ann", V1));
        let bob = PoolKey::of(&endpoint(2, 20, "key-of-bob", V1));
        assert_ne!(ann, bob);
        // Even the same password under two accounts or two servers is two pools.
        assert_ne!(
            PoolKey::of(&endpoint(1, 10, "same", V1)),
            PoolKey::of(&endpoint(2, 10, "same", V1))
        );
        assert_ne!(
            PoolKey::of(&endpoint(1, 10, "same", V1)),
            PoolKey::of(&endpoint(1, 11, "same", V1))
        );
        // A changed password is a new key; the version alone is not.
        assert_ne!(ann, PoolKey::of(&endpoint(1, 10, "new-key", V1)));
        assert_eq!(ann, PoolKey::of(&endpoint(1, 10, "key-of-ann", V2)));
    }

    #[tokio::test]
    async fn newer_settings_retire_the_older_pool_and_older_ones_get_a_throwaway() {
        let pools = Pools::new(SmtpPoolSettings::default());
        let old = pools.server(&endpoint(1, 10, "old", V1));
        assert!(Arc::ptr_eq(
            &old,
            &pools.server(&endpoint(1, 10, "old", V1))
        ));
        let new = pools.server(&endpoint(1, 10, "new", V2));
        assert!(old.is_retired(), "the old password's sessions are closed");
        assert!(!new.is_retired());
        assert_eq!(pools.pool_count(), 1);
        // A message claimed before the save still carries the old settings: it gets a
        // pool that keeps nothing, and the new pool stays.
        let straggler = pools.server(&endpoint(1, 10, "old", V1));
        assert!(straggler.is_retired());
        assert!(!new.is_retired());
        assert!(Arc::ptr_eq(
            &new,
            &pools.server(&endpoint(1, 10, "new", V2))
        ));
    }

    #[tokio::test]
    async fn unused_pools_are_forgotten_by_the_reaper() {
        let pools = Pools::new(SmtpPoolSettings::default());
        let pool = pools.server(&endpoint(1, 10, "secret", V1));
        let busy = pool.permits.try_acquire().expect("a permit");
        pools.reap();
        assert_eq!(pools.pool_count(), 1, "a pool with a session out stays");
        drop(busy);
        pools.reap();
        assert_eq!(pools.pool_count(), 0);
        assert!(
            pool.is_retired(),
            "a sender still holding it keeps nothing in it"
        );
    }

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
