//! One DNS resolver for every outbound connection Mailroom makes on a customer's behalf
//! (mail servers and webhooks), with the egress guard applied to every answer.
//!
//! [`DnsResolver`] wraps hickory-resolver (asynchronous, with the system configuration of
//! `/etc/resolv.conf`, honouring `/etc/hosts`, so `localhost` resolves in tests) and adds
//! what the adapters need:
//!
//! - **one timeout per lookup**, waiting for a free slot included: the lookup is a future
//!   that is dropped when its time is up, so nothing outlives it (the system resolver,
//!   `getaddrinfo`, has no timeout and used to cost a thread per lookup that lived on
//!   after its caller gave up);
//! - **bounded concurrency**: at most [`DnsSettings::max_concurrent_lookups`] lookups at
//!   once, the others wait for a slot within their own timeout and then fail;
//! - **answers served from a cache of its own without a slot**, and **one lookup per
//!   name at a time** (callers of a name already being looked up wait for that answer),
//!   with a name that timed out remembered as timing out for [`TIMEOUT_REMEMBERED`]: a
//!   tenant's name whose nameserver never answers costs one slot now and then, never
//!   all of them, and never delays a lookup of a name already known
//!   (docs/operations.md, "Configuration");
//! - **the egress check** ([`mailroom_domain::egress::check_addresses`]) on every address
//!   of the answer, so the callers connect only to checked addresses and never resolve a
//!   second time (DNS rebinding).
//!
//! The lookups run on a runtime of the resolver's own (one thread, `mailroom-dns`), so
//! blocking callers (the save-time checks) and async callers on any runtime share one
//! resolver, one cache and one bound. The server builds one instance and hands it to
//! both the SMTP and the webhook adapters.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use hickory_resolver::config::{NameServerConfigGroup, ResolveHosts, ResolverConfig, ResolverOpts};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::proto::ProtoErrorKind;
use hickory_resolver::TokioResolver;
use mailroom_domain::egress::{check_addresses, EgressRefusal};
use tokio::runtime::{Handle, Runtime};
use tokio::sync::Semaphore;

/// How the resolver is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DnsSettings {
    /// Ask this nameserver (UDP, then TCP for truncated answers) instead of those in
    /// `/etc/resolv.conf`.
    pub nameserver: Option<SocketAddr>,
    /// The most one lookup may take, its wait for a slot included.
    pub lookup_timeout: Duration,
    /// The most lookups in flight at once.
    pub max_concurrent_lookups: usize,
}

/// The default lookup timeout.
pub const DEFAULT_LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);

/// The default bound on concurrent lookups.
pub const DEFAULT_MAX_CONCURRENT_LOOKUPS: usize = 64;

impl Default for DnsSettings {
    fn default() -> Self {
        Self {
            nameserver: None,
            lookup_timeout: DEFAULT_LOOKUP_TIMEOUT,
            max_concurrent_lookups: DEFAULT_MAX_CONCURRENT_LOOKUPS,
        }
    }
}

/// How long a name whose lookup timed out answers `Timeout` without being asked again.
pub const TIMEOUT_REMEMBERED: Duration = Duration::from_secs(20);

/// The longest an answer is served from the cache, whatever its TTL.
const MAX_CACHED: Duration = Duration::from_secs(300);

/// The most names the cache holds; beyond it, expired entries go, then all.
const MAX_CACHED_NAMES: usize = 10_000;

/// Why a host gave no address to connect to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// The host is empty, does not exist, or has no address; or the resolver failed.
    #[error("{0}")]
    NotFound(String),
    /// No answer within the lookup timeout (waiting for a free slot included).
    #[error("{0}")]
    Timeout(String),
    /// An address of the host is in a blocked range (no connection was attempted).
    #[error("{0}")]
    Refused(EgressRefusal),
}

/// The shared resolver; cheap to clone (clones share the cache, the bound and the thread).
#[derive(Clone)]
pub struct DnsResolver {
    inner: Arc<Inner>,
    /// Owns the resolver's thread. Tasks on that thread hold only `inner`, so the runtime
    /// is never dropped from one of its own tasks.
    _runtime: Arc<RuntimeOwner>,
}

impl std::fmt::Debug for DnsResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DnsResolver")
            .field("settings", &self.inner.settings)
            .finish_non_exhaustive()
    }
}

/// What a lookup needs, shared with the tasks that run lookups.
struct Inner {
    settings: DnsSettings,
    resolver: TokioResolver,
    slots: Semaphore,
    /// Slots of the sending-domain record lookups (TXT, MX), apart from `slots`: their
    /// names are a tenant's, and a tenant's nameserver that never answers must not take
    /// the slots other tenants' deliveries resolve their mail servers with.
    record_slots: Semaphore,
    /// Answers by lower-cased name, served without a slot.
    answers: Mutex<HashMap<String, Cached>>,
    /// One lock per name being looked up: one lookup of a name at a time.
    flights: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    handle: Handle,
}

/// A remembered outcome of a lookup.
#[derive(Clone)]
enum Cached {
    Found(Vec<IpAddr>, Instant),
    TimedOut(Instant),
}

impl Inner {
    /// The remembered outcome for `key`, if still fresh.
    fn cached(&self, key: &str, now: Instant) -> Option<Result<Vec<IpAddr>, LookupError>> {
        let answers = self
            .answers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match answers.get(key)? {
            Cached::Found(addresses, until) if *until > now => Some(Ok(addresses.clone())),
            Cached::TimedOut(until) if *until > now => Some(Err(LookupError::Timeout(format!(
                "resolving {key} timed out less than {} s ago",
                TIMEOUT_REMEMBERED.as_secs()
            )))),
            _ => None,
        }
    }

    fn remember(&self, key: String, entry: Cached, now: Instant) {
        let mut answers = self
            .answers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if answers.len() >= MAX_CACHED_NAMES && !answers.contains_key(&key) {
            answers.retain(|_, cached| match cached {
                Cached::Found(_, until) | Cached::TimedOut(until) => *until > now,
            });
            if answers.len() >= MAX_CACHED_NAMES {
                answers.clear();
            }
        }
        answers.insert(key, entry);
    }

    /// The lock that makes lookups of `key` take turns.
    fn flight(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut flights = self
            .flights
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Arc::clone(flights.entry(key.to_owned()).or_default())
    }

    /// Forgets `key`'s lock once nobody else holds or waits for it.
    fn land(&self, key: &str, flight: Arc<tokio::sync::Mutex<()>>) {
        let mut flights = self
            .flights
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // Two references: the map's and `flight`.
        if Arc::strong_count(&flight) <= 2 {
            flights.remove(key);
        }
    }
}

/// The resolver's own runtime; `None` only while dropping.
struct RuntimeOwner(Option<Runtime>);

impl Drop for RuntimeOwner {
    fn drop(&mut self) {
        // The last clone may go away inside async code, where a runtime may not block.
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

impl DnsResolver {
    /// A resolver with `settings`, on a thread of its own.
    ///
    /// # Errors
    /// When `/etc/resolv.conf` cannot be read (without [`DnsSettings::nameserver`]) or the
    /// thread cannot be started.
    pub fn new(settings: DnsSettings) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(1)
            .thread_name("mailroom-dns")
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let (config, mut options) = match settings.nameserver {
            Some(server) => (
                ResolverConfig::from_parts(
                    None,
                    Vec::new(),
                    NameServerConfigGroup::from_ips_clear(&[server.ip()], server.port(), true),
                ),
                ResolverOpts::default(),
            ),
            None => {
                hickory_resolver::system_conf::read_system_conf().map_err(std::io::Error::other)?
            }
        };
        options.timeout = options.timeout.min(settings.lookup_timeout);
        // `/etc/hosts` first, also with a nameserver of the operator's choosing.
        options.use_hosts_file = ResolveHosts::Always;
        // EDNS, so a 2048-bit DKIM key's TXT record fits one UDP answer.
        options.edns0 = true;
        // A record a customer just published is seen at the next check, whatever the
        // SOA of an earlier "no such name" said.
        options.negative_max_ttl = Some(Duration::from_secs(30));
        let resolver = {
            let _entered = handle.enter();
            TokioResolver::builder_with_config(config, TokioConnectionProvider::default())
                .with_options(options)
                .build()
        };
        Ok(Self {
            inner: Arc::new(Inner {
                settings,
                resolver,
                slots: Semaphore::new(settings.max_concurrent_lookups.max(1)),
                record_slots: Semaphore::new(MAX_CONCURRENT_RECORD_LOOKUPS),
                answers: Mutex::new(HashMap::new()),
                flights: Mutex::new(HashMap::new()),
                handle,
            }),
            _runtime: Arc::new(RuntimeOwner(Some(runtime))),
        })
    }

    /// One resolver per process with the default settings and the system configuration,
    /// for callers that were handed none (tools and tests); the server builds its own.
    ///
    /// # Panics
    /// When it cannot be built (see [`DnsResolver::new`]).
    pub fn process_default() -> Self {
        static DEFAULT: OnceLock<DnsResolver> = OnceLock::new();
        DEFAULT
            .get_or_init(|| Self::new(DnsSettings::default()).expect("the default DNS resolver"))
            .clone()
    }

    /// The settings it was built with.
    pub fn settings(&self) -> DnsSettings {
        self.inner.settings
    }

    /// Resolves `host` (a name, or an IP literal with or without IPv6 brackets, taken as
    /// it is) and checks every address with the egress guard; `allow_private` is the
    /// operator's `MAILROOM_ALLOW_PRIVATE_EGRESS`. Returns every address, without
    /// duplicates, in the resolver's order: connect only to these.
    ///
    /// # Errors
    /// See [`LookupError`].
    pub async fn resolve_checked(
        &self,
        host: &str,
        allow_private: bool,
    ) -> Result<Vec<IpAddr>, LookupError> {
        let lookup = self.inner.handle.spawn(resolve_checked(
            Arc::clone(&self.inner),
            host.to_owned(),
            allow_private,
        ));
        lookup.await.unwrap_or_else(|error| {
            Err(LookupError::NotFound(format!(
                "{host}: the lookup task failed: {error}"
            )))
        })
    }

    /// [`DnsResolver::resolve_checked`] for blocking callers: the calling thread waits
    /// (at most the lookup timeout) while the resolver's thread resolves. Never call it on
    /// an async executor thread.
    ///
    /// # Errors
    /// See [`LookupError`].
    pub fn resolve_checked_blocking(
        &self,
        host: &str,
        allow_private: bool,
    ) -> Result<Vec<IpAddr>, LookupError> {
        self.blocking(resolve_checked(
            Arc::clone(&self.inner),
            host.to_owned(),
            allow_private,
        ))
    }

    /// Runs `lookup` on the resolver's runtime while the calling thread waits for it.
    fn blocking<T: Send + 'static>(
        &self,
        lookup: impl std::future::Future<Output = Result<T, LookupError>> + Send + 'static,
    ) -> Result<T, LookupError> {
        let (sender, receiver) = mpsc::sync_channel(1);
        self.inner.handle.spawn(async move {
            let _ = sender.send(lookup.await);
        });
        // The task ends by its own timeout; the margin only guards against a stalled
        // resolver thread.
        let limit = self.inner.settings.lookup_timeout + Duration::from_secs(1);
        receiver.recv_timeout(limit).unwrap_or_else(|_| {
            Err(LookupError::Timeout(format!(
                "no answer from the resolver within {} s",
                limit.as_secs_f32()
            )))
        })
    }
}

/// The most TXT and MX lookups in flight at once, on slots of their own (see
/// `Inner::record_slots`).
pub const MAX_CONCURRENT_RECORD_LOOKUPS: usize = 16;

/// The most TXT or MX records one record lookup keeps.
pub const MAX_RECORDS: usize = 32;

/// The most text one TXT record keeps (its strings joined); longer records are dropped.
pub const MAX_TXT_BYTES: usize = 4096;

/// Record lookups for checks of sending domains: TXT and MX, each bounded in time like an
/// address lookup, in concurrency on slots of their own
/// ([`MAX_CONCURRENT_RECORD_LOOKUPS`]) and in size ([`MAX_RECORDS`],
/// [`MAX_TXT_BYTES`]). No egress check: nothing connects to what they return.
impl DnsResolver {
    /// The TXT records at `name`, each record's strings joined; empty when the name has
    /// none or does not exist. Blocking (see [`DnsResolver::resolve_checked_blocking`]).
    ///
    /// # Errors
    /// [`LookupError::Timeout`], or [`LookupError::NotFound`] for another failure.
    pub fn txt_blocking(&self, name: &str) -> Result<Vec<String>, LookupError> {
        self.blocking(record_lookup(
            Arc::clone(&self.inner),
            name.to_owned(),
            RecordKind::Txt,
        ))
    }

    /// The MX exchanges at `name` (without the trailing dot); empty when there is none.
    /// Blocking.
    ///
    /// # Errors
    /// As [`DnsResolver::txt_blocking`].
    pub fn mx_blocking(&self, name: &str) -> Result<Vec<String>, LookupError> {
        self.blocking(record_lookup(
            Arc::clone(&self.inner),
            name.to_owned(),
            RecordKind::Mx,
        ))
    }
}

#[derive(Clone, Copy)]
enum RecordKind {
    Txt,
    Mx,
}

/// One bounded TXT or MX lookup.
async fn record_lookup(
    inner: Arc<Inner>,
    name: String,
    kind: RecordKind,
) -> Result<Vec<String>, LookupError> {
    let limit = inner.settings.lookup_timeout;
    let bounded = tokio::time::timeout(limit, async {
        let _slot = inner.record_slots.acquire().await.map_err(|error| {
            LookupError::NotFound(format!("{name}: the resolver is shut down: {error}"))
        })?;
        // Absolute: no search domains of resolv.conf appended.
        let fqdn = format!("{}.", name.trim_end_matches('.'));
        let records = match kind {
            RecordKind::Txt => inner.resolver.txt_lookup(fqdn).await.map(|found| {
                found
                    .iter()
                    .take(MAX_RECORDS)
                    .filter_map(|txt| {
                        let mut joined = Vec::new();
                        for part in txt.txt_data() {
                            joined.extend_from_slice(part);
                        }
                        (joined.len() <= MAX_TXT_BYTES)
                            .then(|| String::from_utf8_lossy(&joined).into_owned())
                    })
                    .collect::<Vec<_>>()
            }),
            RecordKind::Mx => inner.resolver.mx_lookup(fqdn).await.map(|found| {
                found
                    .iter()
                    .take(MAX_RECORDS)
                    .map(|mx| mx.exchange().to_ascii().trim_end_matches('.').to_owned())
                    .collect::<Vec<_>>()
            }),
        };
        match records {
            Ok(records) => Ok(records),
            Err(error) if error.is_no_records_found() || error.is_nx_domain() => Ok(Vec::new()),
            Err(error) => {
                let timed_out = error
                    .proto()
                    .is_some_and(|proto| matches!(proto.kind(), ProtoErrorKind::Timeout));
                Err(if timed_out {
                    LookupError::Timeout(format!("looking up {name}: {error}"))
                } else {
                    LookupError::NotFound(format!("{name}: {error}"))
                })
            }
        }
    })
    .await;
    bounded.unwrap_or_else(|_| {
        Err(LookupError::Timeout(format!(
            "looking up {name} took longer than {} s",
            limit.as_secs_f32()
        )))
    })
}

/// `host` without surrounding space and IPv6 brackets.
fn bare_host(host: &str) -> Result<&str, LookupError> {
    let host = host.trim();
    let bare = host
        .strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .unwrap_or(host);
    if bare.is_empty() {
        return Err(LookupError::NotFound("the host is empty".to_owned()));
    }
    Ok(bare)
}

/// `host` resolved (unless a literal) and checked, on the resolver's runtime.
async fn resolve_checked(
    inner: Arc<Inner>,
    host: String,
    allow_private: bool,
) -> Result<Vec<IpAddr>, LookupError> {
    let bare = bare_host(&host)?;
    let addresses = match bare.parse::<IpAddr>() {
        Ok(literal) => vec![literal],
        Err(_) => lookup(&inner, bare).await?,
    };
    check_addresses(bare, &addresses, allow_private).map_err(LookupError::Refused)?;
    Ok(addresses)
}

/// One bounded lookup of `name`: from the cache without a slot, else one lookup of the
/// name at a time, each holding a slot.
async fn lookup(inner: &Inner, name: &str) -> Result<Vec<IpAddr>, LookupError> {
    let key = name.to_ascii_lowercase();
    if let Some(outcome) = inner.cached(&key, Instant::now()) {
        return outcome;
    }
    let limit = inner.settings.lookup_timeout;
    let flight = inner.flight(&key);
    // When this caller asked the nameserver: if the time runs out after the question
    // had at least half the limit, the name itself did not answer in time; if it ran
    // out mostly waiting for a turn or a slot, the name is not blamed.
    let asked: Mutex<Option<Instant>> = Mutex::new(None);
    let bounded = tokio::time::timeout(limit, async {
        let _turn = flight.lock().await;
        // The lookup this one waited for may have answered.
        if let Some(outcome) = inner.cached(&key, Instant::now()) {
            return outcome;
        }
        // The semaphore is never closed.
        let _slot = inner.slots.acquire().await.map_err(|error| {
            LookupError::NotFound(format!("{name}: the resolver is shut down: {error}"))
        })?;
        *asked
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Instant::now());
        let outcome = ask(inner, name).await;
        let now = Instant::now();
        match &outcome {
            Ok((addresses, valid_until)) => {
                let until = (*valid_until).min(now + MAX_CACHED);
                if until > now {
                    inner.remember(key.clone(), Cached::Found(addresses.clone(), until), now);
                }
            }
            Err(LookupError::Timeout(_)) => {
                inner.remember(key.clone(), Cached::TimedOut(now + TIMEOUT_REMEMBERED), now);
            }
            Err(_) => {}
        }
        outcome.map(|(addresses, _)| addresses)
    })
    .await;
    let outcome = bounded.unwrap_or_else(|_| {
        let asked_at = *asked
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = Instant::now();
        if asked_at.is_some_and(|at| now.duration_since(at) >= limit / 2) {
            inner.remember(key.clone(), Cached::TimedOut(now + TIMEOUT_REMEMBERED), now);
        }
        Err(LookupError::Timeout(format!(
            "resolving {name} took longer than {} s",
            limit.as_secs_f32()
        )))
    });
    inner.land(&key, flight);
    outcome
}

/// Asks the resolver for `name`'s addresses (without duplicates, in its order) and how
/// long the answer is valid.
async fn ask(inner: &Inner, name: &str) -> Result<(Vec<IpAddr>, Instant), LookupError> {
    let found = inner.resolver.lookup_ip(name).await.map_err(|error| {
        let timed_out = error
            .proto()
            .is_some_and(|proto| matches!(proto.kind(), ProtoErrorKind::Timeout));
        if timed_out {
            LookupError::Timeout(format!("resolving {name}: {error}"))
        } else if error.is_no_records_found() || error.is_nx_domain() {
            LookupError::NotFound(format!("{name} does not resolve"))
        } else {
            LookupError::NotFound(format!("{name}: {error}"))
        }
    })?;
    let mut unique: Vec<IpAddr> = Vec::new();
    for address in found.iter() {
        if !unique.contains(&address) {
            unique.push(address);
        }
    }
    Ok((unique, found.valid_until()))
}
