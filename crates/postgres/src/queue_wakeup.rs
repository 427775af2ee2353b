//! Waking the message workers with `LISTEN`/`NOTIFY` (docs/operations.md, "Waking the
//! workers: LISTEN/NOTIFY").
//!
//! The sending side ([`PgQueueWakeup`]) runs `NOTIFY` in its own short statement after
//! the queueing transaction committed, never inside it: PostgreSQL serialises the commits
//! of transactions that notified, WAL flush included, which cut concurrent inserts from
//! about 19,000 to 6,000 per second here; a separate `NOTIFY` writes no WAL. Wake-ups
//! that arrive while one is being sent become one more, so a burst of sends costs at most
//! one `NOTIFY` per round trip.
//!
//! The listening side ([`listen_for_queued_messages`]) holds one tokio-postgres
//! connection per worker process: diesel's connections cannot wait for a notification.

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Condvar, Mutex, PoisonError, Weak,
    },
    time::Duration,
};

use futures_util::{stream, StreamExt};
use mailroom_app::ports::{QueueEvent, QueueWakeup};
use tokio_postgres::AsyncMessage;

use crate::{
    listen_tls::{connector, listener_tls, ListenerTls, RustlsConnect},
    PgDatabase,
};

/// The channel the wake-ups travel on.
const QUEUE_CHANNEL: &str = "mailroom_messages_queued";

/// How long the sending thread sleeps between checks that its handles still exist.
const IDLE_CHECK: Duration = Duration::from_secs(1);
/// How long the listener waits before connecting again after its connection failed.
const RECONNECT_PAUSE: Duration = Duration::from_secs(2);
/// How long connecting and `LISTEN` may take before the listener gives up and tries again
/// (a server that accepts the connection and then says nothing would hold it forever).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the listener's connection may be silent before TCP checks that the server is
/// still there, and how: every [`KEEPALIVE_INTERVAL`], given up after [`KEEPALIVE_PROBES`]
/// unanswered probes (about a minute in all). A connection that died without a word (a
/// restarted NAT, a failed-over server) would otherwise look like one that hears nothing
/// for the kernel's default of more than two hours, and sends would wait for the
/// one-second poll all that time.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEPALIVE_PROBES: u32 = 3;

/// Sends the wake-ups of [`QueueWakeup`] as `NOTIFY` on [`QUEUE_CHANNEL`], from one
/// thread over the database's pool, coalescing those that arrive while one is sent.
/// The thread ends about a second after the last handle is dropped.
#[derive(Clone)]
pub struct PgQueueWakeup {
    wanted: Arc<Wanted>,
}

/// Whether a wake-up waits to be sent.
#[derive(Default)]
struct Wanted {
    pending: Mutex<bool>,
    changed: Condvar,
}

impl Wanted {
    /// Waits up to `timeout` for a pending wake-up and takes it.
    fn take(&self, timeout: Duration) -> bool {
        let pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut pending, _) = self
            .changed
            .wait_timeout_while(pending, timeout, |pending| !*pending)
            .unwrap_or_else(PoisonError::into_inner);
        std::mem::take(&mut *pending)
    }
}

impl PgQueueWakeup {
    /// Wake-ups sent over `database`'s pool.
    ///
    /// # Errors
    /// When the sending thread cannot be started.
    pub fn new(database: &PgDatabase) -> std::io::Result<Self> {
        let wanted = Arc::new(Wanted::default());
        let database = database.clone();
        let notify = format!("NOTIFY {QUEUE_CHANNEL}");
        let weak = Arc::downgrade(&wanted);
        std::thread::Builder::new()
            .name("queue-wakeup".into())
            .spawn(move || send_until_dropped(&weak, || database.execute_simple(&notify)))?;
        Ok(Self { wanted })
    }
}

impl QueueWakeup for PgQueueWakeup {
    fn messages_queued(&self) {
        *self
            .wanted
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = true;
        self.wanted.changed.notify_one();
    }
}

/// Sends each pending wake-up with `send` until every handle of `wanted` is dropped.
fn send_until_dropped(wanted: &Weak<Wanted>, send: impl Fn() -> Result<(), String>) {
    while let Some(wanted) = wanted.upgrade() {
        let pending = wanted.take(IDLE_CHECK);
        drop(wanted);
        if pending {
            if let Err(error) = send() {
                tracing::debug!(
                    %error,
                    "a queue wake-up was not sent: the workers' poll finds the messages"
                );
            }
        }
    }
}

/// Listens on [`QUEUE_CHANNEL`] until the task is dropped, telling `on` when it listens,
/// when messages were queued and when it stopped hearing (then it connects again after a
/// pause). Uses its own connection to `database_url`, with TLS as the URL's `sslmode` asks
/// ([`crate::listen_tls`]: as libpq, which the pool uses, would). A URL whose TLS settings
/// the listener cannot honour (a client certificate, a missing root file) stops it before
/// it connects, with the reason in the log: the worker stays [`QueueEvent::Deaf`] and
/// polls, rather than connect with less protection than the pool.
pub async fn listen_for_queued_messages<F>(database_url: String, on: F)
where
    F: Fn(QueueEvent) + Send + Sync + 'static,
{
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let tls = listener_tls(
        &database_url,
        |name| std::env::var(name).ok(),
        home.as_deref(),
    )
    .and_then(|tls| connector(&tls).map(|connector| (tls, connector)));
    let (tls, connector) = match tls {
        Ok(tls) => tls,
        Err(reason) => {
            tracing::error!(
                %reason,
                "the queue wake-up listener does not start: the message workers poll instead"
            );
            on(QueueEvent::Deaf);
            return;
        }
    };
    tracing::debug!(sslmode = ?tls.mode, verification = ?tls.verification, "queue wake-up listener");
    // Failures since the listener last listened: the first of each run is said at warn,
    // the rest quietly (a server that refuses it keeps refusing).
    let mut failures = 0_u32;
    loop {
        let listened = AtomicBool::new(false);
        let outcome = listen_once(&tls, &connector, &|event| {
            if event == QueueEvent::Listening {
                listened.store(true, Ordering::Relaxed);
            }
            on(event);
        })
        .await;
        on(QueueEvent::Deaf);
        if listened.load(Ordering::Relaxed) {
            failures = 0;
        }
        match outcome {
            Ok(()) => tracing::info!("the queue wake-up connection closed; reconnecting"),
            Err(error) => {
                if failures == 0 {
                    tracing::warn!(
                        %error,
                        "cannot listen for queue wake-ups: the message workers poll instead"
                    );
                } else {
                    tracing::debug!(%error, "cannot listen for queue wake-ups");
                }
                failures = failures.saturating_add(1);
            }
        }
        tokio::time::sleep(RECONNECT_PAUSE).await;
    }
}

/// One connection's life: `LISTEN`, then every notification until it closes.
async fn listen_once<F>(
    tls: &ListenerTls,
    connector: &RustlsConnect,
    on: &F,
) -> Result<(), tokio_postgres::Error>
where
    F: Fn(QueueEvent),
{
    let mut config: tokio_postgres::Config = tls.url.parse()?;
    config
        .ssl_mode(tls.client_mode())
        .connect_timeout(CONNECT_TIMEOUT)
        .keepalives(true)
        .keepalives_idle(KEEPALIVE_IDLE)
        .keepalives_interval(KEEPALIVE_INTERVAL)
        .keepalives_retries(KEEPALIVE_PROBES);
    let (client, mut connection) = config.connect(connector.clone()).await?;
    // Polling the connection's messages also drives its requests (the LISTEN below).
    let mut messages = stream::poll_fn(move |cx| connection.poll_message(cx));
    let listen_sql = format!("LISTEN {QUEUE_CHANNEL}");
    let listen = tokio::time::timeout(CONNECT_TIMEOUT, client.batch_execute(&listen_sql));
    tokio::pin!(listen);
    loop {
        tokio::select! {
            listened = &mut listen => match listened {
                Ok(listened) => {
                    listened?;
                    break;
                }
                // Said as a closed connection: the caller reconnects after its pause.
                Err(_) => {
                    tracing::warn!("LISTEN for queue wake-ups took over {CONNECT_TIMEOUT:?}");
                    return Ok(());
                }
            },
            message = messages.next() => match message {
                None => return Ok(()),
                Some(message) => drop(message?),
            },
        }
    }
    on(QueueEvent::Listening);
    while let Some(message) = messages.next().await {
        if let AsyncMessage::Notification(_) = message? {
            on(QueueEvent::Queued);
        }
    }
    Ok(())
}
