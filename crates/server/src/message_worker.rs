//! The message delivery worker.
//!
//! Claims feed **lanes**: a lane is one mail server of one account ([`Lane`]), with its own
//! bound on concurrent sessions (`MAILROOM_SMTP_CONNECTIONS_PER_SERVER`). A claimed,
//! rendered message waits for a session slot of its own lane only, and its outcome is
//! recorded as soon as its session ends, so a slow or firewalled server fills its own lane
//! and nothing else: no claim waits for another tenant's sessions. A lane holding
//! [`LANE_BACKLOG`] sessions' worth of messages is full, and claims skip its account until
//! it drains; the worker as a whole holds at most [`MAX_HELD`] messages, the last quarter
//! of which is kept for accounts that hold nothing ([`crate::workers::claim_room`]), so
//! one user's many accounts with stalled servers cannot hold the whole worker.
//!
//! Each step:
//! 1. the claim (one transaction, committed: the claim is counted before anything is
//!    rendered, so a message whose render kills its process is quarantined after a few
//!    claims instead of being claimed first forever);
//! 2. rendering, outside any transaction, in `render-sandbox` children with a bounded
//!    address space ([`crate::render_sandbox`]), then one short transaction for the
//!    tracking links and the render failures;
//! 3. the session, in its lane, with no transaction open;
//! 4. the record: outcomes that finished while the previous record ran go together in
//!    one short transaction.
//!
//! An idle loop looks for due messages every [`IDLE_POLL`], or every
//! [`LISTENING_POLL`] while the worker hears the queue's wake-ups
//! ([`MessageWorker::hear`]; docs/operations.md, "Waking the workers: LISTEN/NOTIFY"):
//! a send then reaches its session without waiting for a poll, and the poll is left to
//! work that comes due by time (retries, scheduled sends, expired leases).
//!
//! Leases are short ([`crate::config::DEFAULT_MESSAGE_LEASE`], 30 s) and renewed: one
//! statement every third of the lease extends the lease of everything the worker holds
//! ([`MessageWorker::renew_leases`]), so a SIGKILLed worker's messages are claimed by
//! another worker about one lease later, however long a live worker's sessions take.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use crate::metrics::{delivery_counters, SmtpReplyClass};
use anyhow::{Context, Result};
use futures_util::future::join_all;
use mailroom_app::{
    messages::{
        claim_messages, finish_rendered, record_message_outcomes, renew_message_leases,
        send_claimed_message, ClaimRequest, DeliverySettings, Lane, MessageJob, RenderJob,
        SendOutcome,
    },
    ports::{Lease, QueueEvent},
    AppError, Services,
};
use mailroom_domain::{
    message::{AttemptFault, ReplyClass},
    AccountId, MessageId, UserId, Uuid,
};
use tokio::{
    sync::{mpsc, watch, Notify, Semaphore},
    task::JoinSet,
};

use crate::{
    render_sandbox::{Rendered, Renderer},
    workers::{claim_room, run_steps, ClaimRoom, Next, UnreachableAccounts},
    Config,
};

/// The most messages one claim takes.
pub const BATCH_SIZE: u32 = 128;
/// Claim loops one process runs side by side (each claims its own messages, `SKIP
/// LOCKED`), sharing the process's lanes.
pub const PARALLEL_ROUNDS: usize = 2;
/// The most messages one worker process holds (claimed, outcome not yet recorded).
pub const MAX_HELD: usize = BATCH_SIZE as usize * 4;
/// The rendered bytes one worker process holds at most, for the messages it rendered
/// that wait for or are in their sessions ([`mailroom_app::rendering::RenderedMessage::size`]),
/// plus one message per claim loop: a claim renders only while the worker is under it,
/// and its messages past it go back to the queue unrendered.
pub const MAX_HELD_RENDERED_BYTES: usize = 64 * 1024 * 1024;
/// The most of [`MAX_HELD_RENDERED_BYTES`] one claim may render, so the claim loops can
/// render side by side.
pub const CLAIM_RENDERED_BYTES: usize = MAX_HELD_RENDERED_BYTES / PARALLEL_ROUNDS;
/// A lane holding this many times its session bound is full: claims skip its account.
pub const LANE_BACKLOG: usize = 2;
/// How long an idle loop waits before looking for due messages again.
pub const IDLE_POLL: Duration = Duration::from_millis(100);
/// The same while the worker hears the queue's wake-ups: only work that comes due by time
/// waits for it, at most this long.
pub const LISTENING_POLL: Duration = Duration::from_secs(1);
/// How long an outcome that could not be recorded because the database was unavailable
/// is retried; the lease is renewed meanwhile.
const RECORD_RETRY_FOR: Duration = Duration::from_secs(30);
/// The most account owners a worker remembers for its reserve (a few MiB at most).
const MAX_KNOWN_OWNERS: usize = 100_000;
const RECORD_RETRY_PAUSE: Duration = Duration::from_millis(500);

/// A message ready to send, with the lane it waits in.
type LaneJob = (MessageJob, Arc<LaneState>);

/// What one round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MessageRound {
    /// Rows claimed (including those skipped or failed without a session).
    pub claimed: usize,
    /// SMTP sessions run.
    pub attempted: usize,
}

/// One lane's state in this process.
struct LaneState {
    /// Session slots.
    sessions: Semaphore,
    /// Messages in this lane: waiting for a slot or in a session. Not those being recorded:
    /// counting them made a fast lane look full while its sessions stood idle.
    held: AtomicUsize,
}

struct Shared {
    services: Services,
    settings: DeliverySettings,
    renderer: Renderer,
    lease_token: Uuid,
    lane_sessions: usize,
    lanes: Mutex<HashMap<Lane, Arc<LaneState>>>,
    /// Every message this worker holds a lease on, for the renewal.
    /// With each message's account: the renewal runs one statement per account.
    held: Mutex<HashMap<MessageId, AccountId>>,
    /// The owner of each account this worker has claimed for: the reserve is for owners
    /// who hold nothing ([`MessageWorker::reserve_skips`]). An account's owner never
    /// changes, so nothing here goes stale; at most [`MAX_KNOWN_OWNERS`] are kept.
    owners: Mutex<HashMap<AccountId, UserId>>,
    /// The rendered bytes this worker holds ([`MAX_HELD_RENDERED_BYTES`]).
    rendered: Mutex<RenderedBytes>,
    /// Signalled when a held message is released (to every waiting loop) and when messages
    /// were queued (to each loop, waiting or not: [`MessageWorker::hear`]).
    wake: Notify,
    /// Whether the worker hears the queue's wake-ups now.
    listening: AtomicBool,
    /// How long an idle loop waits while it does ([`LISTENING_POLL`]).
    listening_poll: Duration,
    /// Claims of this process run one at a time, so each sees what the previous one took
    /// (the worker's bound on held messages, full lanes); rendering and sending run side
    /// by side.
    claiming: tokio::sync::Mutex<()>,
    /// Accounts claims leave out for now: their part of the store was away.
    unreachable: UnreachableAccounts,
}

/// Why recording outcomes failed: the store was away (worth retrying), or anything else.
enum RecordFailure {
    Unavailable(String),
    Other(String),
}

/// The rendered messages a worker holds, by size, and the budgets of the claims
/// rendering now.
#[derive(Default)]
struct RenderedBytes {
    sizes: HashMap<MessageId, usize>,
    /// The sizes, and the budgets reserved by claims that are rendering.
    total: usize,
}

/// Runs message delivery.
#[derive(Clone)]
pub struct MessageWorker {
    shared: Arc<Shared>,
}

impl MessageWorker {
    /// A worker with the configuration's attempt limit, lease, lane bound and renderer.
    pub fn new(services: Services, config: &Config) -> Self {
        let settings = DeliverySettings {
            lease: config.message_lease,
            batch_size: BATCH_SIZE,
            max_attempts: config.message_max_attempts,
            monthly_send_limit: config.monthly_send_limit,
        };
        let lease_token = services.ids.next_uuid();
        Self {
            shared: Arc::new(Shared {
                services,
                settings,
                renderer: Renderer::for_program(config.render_program.clone()),
                lease_token,
                lane_sessions: config.smtp_connections_per_server.max(1),
                lanes: Mutex::new(HashMap::new()),
                held: Mutex::new(HashMap::new()),
                owners: Mutex::new(HashMap::new()),
                rendered: Mutex::new(RenderedBytes::default()),
                wake: Notify::new(),
                listening: AtomicBool::new(false),
                listening_poll: LISTENING_POLL,
                claiming: tokio::sync::Mutex::new(()),
                unreachable: UnreachableAccounts::default(),
            }),
        }
    }

    /// The same worker, waiting `poll` between idle claims while it hears the queue's
    /// wake-ups (tests make it long, so only a wake-up can explain a quick delivery).
    ///
    /// # Panics
    /// When the worker was cloned already.
    #[must_use]
    pub fn with_listening_poll(mut self, poll: Duration) -> Self {
        Arc::get_mut(&mut self.shared)
            .expect("with_listening_poll before the worker is cloned")
            .listening_poll = poll;
        self
    }

    /// Takes in what the queue's listener heard ([`mailroom_postgres::listen_for_queued_messages`]).
    pub fn hear(&self, event: QueueEvent) {
        match event {
            QueueEvent::Deaf => self.set_listening(false),
            QueueEvent::Listening => {
                self.set_listening(true);
                self.wake_claims();
            }
            QueueEvent::Queued => self.wake_claims(),
        }
    }

    fn set_listening(&self, listening: bool) {
        let was = self.shared.listening.swap(listening, Ordering::SeqCst);
        delivery_counters().queue_wakeups_listening(listening);
        if was != listening {
            tracing::info!(listening, "message worker: queue wake-ups");
        }
    }

    /// Whether the worker hears the queue's wake-ups now.
    pub fn listening(&self) -> bool {
        self.shared.listening.load(Ordering::SeqCst)
    }

    /// Wakes each claim loop: a waiting one at once, one in the middle of a claim as soon
    /// as it would wait (its claim may have looked before the new messages committed).
    fn wake_claims(&self) {
        // `notify_one` keeps one permit when no loop waits; two calls cover two loops.
        for _ in 0..PARALLEL_ROUNDS {
            self.shared.wake.notify_one();
        }
    }

    /// How long an idle loop waits before it claims again.
    fn idle_poll(&self) -> Duration {
        if self.listening() {
            self.shared.listening_poll
        } else {
            IDLE_POLL
        }
    }

    /// The settings rounds run with.
    pub fn settings(&self) -> &DeliverySettings {
        &self.shared.settings
    }

    /// How many messages the worker holds now.
    pub fn held(&self) -> usize {
        lock(&self.shared.held).len()
    }

    /// One round, start to end: claims (skipping accounts whose lanes are full), renders,
    /// sends each message in its lane and records each outcome right after its session;
    /// returns when every message of the round is recorded.
    ///
    /// # Errors
    /// When the claim or the render's transaction fails (claimed messages then stay
    /// leased until the lease runs out).
    pub async fn run_once(&self) -> Result<MessageRound> {
        let Some((lease, claimed, jobs)) = self.claim_and_render().await? else {
            return Ok(MessageRound::default());
        };
        let attempted = jobs.len();
        self.deliver(lease, jobs).await;
        Ok(MessageRound { claimed, attempted })
    }

    /// Claims as many messages as the worker has room for (at most [`BATCH_SIZE`]) and
    /// renders them; `None` when there is no room. Claims run one at a time, so each sees
    /// what the previous one took.
    async fn claim_and_render(&self) -> Result<Option<(Lease, usize, Vec<LaneJob>)>> {
        let one_at_a_time = self.shared.claiming.lock().await;
        let ClaimRoom { room, in_reserve } = claim_room(self.held(), MAX_HELD, BATCH_SIZE as usize);
        let limit = u32::try_from(room).unwrap_or(BATCH_SIZE);
        if limit == 0 {
            return Ok(None);
        }
        // The bytes this claim may render, reserved until its messages are rendered.
        let budget = {
            let mut rendered = lock(&self.shared.rendered);
            let budget = MAX_HELD_RENDERED_BYTES
                .saturating_sub(rendered.total)
                .min(CLAIM_RENDERED_BYTES);
            rendered.total += budget;
            budget
        };
        if budget == 0 {
            return Ok(None);
        }
        let reserved = Reservation {
            worker: self,
            budget,
        };
        let mut skip_accounts = self.full_accounts();
        skip_accounts.extend(self.shared.unreachable.current());
        if in_reserve {
            skip_accounts.extend(self.reserve_skips());
            skip_accounts.sort_unstable();
            skip_accounts.dedup();
        }
        let request = ClaimRequest {
            lease_token: self.shared.lease_token,
            limit,
            skip_accounts,
        };
        let shared = self.shared.clone();
        let claim = tokio::task::spawn_blocking(move || {
            claim_messages(&shared.services, &shared.settings, &request)
        })
        .await
        .context("the claim task")?
        .map_err(|error| {
            if let AppError::AccountUnavailable(account, _) = &error {
                self.shared.unreachable.note(*account);
            }
            anyhow::anyhow!("claiming messages: {error}")
        })?;
        let _reserved = reserved;
        let (lease, claimed) = (claim.lease, claim.claimed);
        self.learn_owners(&claim.to_render);
        let ids: Vec<MessageId> = claim.to_render.iter().map(|job| job.message.id).collect();
        self.hold(
            claim
                .to_render
                .iter()
                .map(|job| (job.message.id, job.message.account_id)),
        );
        drop(one_at_a_time);
        if claim.to_render.is_empty() {
            return Ok(Some((lease, claimed, Vec::new())));
        }
        let shared = self.shared.clone();
        let prepared = tokio::task::spawn_blocking(move || {
            let mut rendered = Vec::with_capacity(claim.to_render.len());
            let mut unrendered = Vec::new();
            let mut deferred = Vec::new();
            let outcomes = shared.renderer.render_within(&claim.to_render, budget);
            for (job, outcome) in claim.to_render.into_iter().zip(outcomes) {
                match outcome {
                    Rendered::Done(outcome) => rendered.push((job, outcome)),
                    Rendered::NoRenderer => unrendered.push(job.message.id),
                    Rendered::Deferred => deferred.push(job),
                }
            }
            if !deferred.is_empty() {
                tracing::info!(
                    messages = deferred.len(),
                    budget,
                    "messages queued again unrendered: the claim's rendered messages took its bytes"
                );
            }
            finish_rendered(&shared.services, &lease, rendered, &deferred)
                .map(|jobs| (jobs, unrendered))
        })
        .await
        .context("the render task");
        match prepared {
            Ok(Ok((jobs, unrendered))) => {
                // Failed renders were settled; messages no renderer could take are left to
                // their lease, like a crash.
                let kept: HashSet<MessageId> = jobs.iter().map(|job| job.message.id).collect();
                let dropped: Vec<MessageId> =
                    ids.into_iter().filter(|id| !kept.contains(id)).collect();
                if !unrendered.is_empty() {
                    tracing::warn!(
                        messages = unrendered.len(),
                        "messages left unrendered until their lease runs out"
                    );
                }
                self.release(&dropped);
                self.hold_rendered(&jobs);
                let jobs = jobs
                    .into_iter()
                    .map(|job| {
                        let lane = self.enter_lane(job.lane);
                        (job, lane)
                    })
                    .collect();
                Ok(Some((lease, claimed, jobs)))
            }
            Ok(Err(error)) => {
                self.release(&ids);
                Err(anyhow::anyhow!("storing rendered messages: {error}"))
            }
            Err(error) => {
                self.release(&ids);
                Err(error)
            }
        }
    }

    /// Sends each job in its lane and records outcomes as sessions end; returns when every
    /// job is recorded (or given up on).
    async fn deliver(&self, lease: Lease, jobs: Vec<LaneJob>) {
        if jobs.is_empty() {
            return;
        }
        let (finished, mut outcomes) = mpsc::unbounded_channel();
        let sessions = async move {
            let sends = jobs.into_iter().map(|(job, lane)| {
                let finished = finished.clone();
                async move {
                    let outcome = {
                        let _slot = lane.sessions.acquire().await;
                        send_claimed_message(&self.shared.services, &job).await
                    };
                    // The session is over: the message leaves its lane (it stays held by
                    // the worker until recorded). Down by one at a time, so only the step
                    // from `full` leaves a full lane, and a claim may take more now.
                    if lane.held.fetch_sub(1, Ordering::SeqCst) == self.lane_full_at() {
                        self.shared.wake.notify_waiters();
                    }
                    delivery_counters().smtp_reply(reply_class(&outcome));
                    // The receiver lives until every sender is gone.
                    let _ = finished.send((job, outcome));
                }
            });
            join_all(sends).await;
        };
        let recorder = async {
            // Whatever finished while the last record ran goes into the next one: one
            // transaction per group, each still right after its sessions.
            while let Some(first) = outcomes.recv().await {
                let mut group = vec![first];
                while let Ok(next) = outcomes.try_recv() {
                    group.push(next);
                }
                let ids: Vec<MessageId> = group.iter().map(|(job, _)| job.message.id).collect();
                self.record(group, lease).await;
                self.release(&ids);
            }
        };
        tokio::join!(sessions, recorder);
    }

    async fn record(&self, group: Vec<(MessageJob, SendOutcome)>, lease: Lease) {
        // One transaction for the group; when the store is away for it, each account's
        // part is retried on its own, so an account whose shard is away (Citus) holds up
        // no other account's records.
        let mut parts: BTreeMap<AccountId, Vec<(MessageJob, SendOutcome)>> = BTreeMap::new();
        for item in group {
            parts
                .entry(item.0.message.account_id)
                .or_default()
                .push(item);
        }
        let parts: Vec<Arc<Vec<(MessageJob, SendOutcome)>>> =
            parts.into_values().map(Arc::new).collect();
        let started = std::time::Instant::now();
        let reason = match self.record_once(&parts, lease).await {
            Ok(()) => return,
            Err(RecordFailure::Unavailable(reason)) => reason,
            Err(RecordFailure::Other(error)) => {
                tracing::warn!(messages = count(&parts), %error, "recording message outcomes failed");
                return;
            }
        };
        tracing::warn!(messages = count(&parts), %reason, "recording message outcomes failed; retrying");
        join_all(
            parts
                .into_iter()
                .map(|part| self.record_retrying(part, lease, started)),
        )
        .await;

        fn count(parts: &[Arc<Vec<(MessageJob, SendOutcome)>>]) -> usize {
            parts.iter().map(|part| part.len()).sum()
        }
    }

    /// Records one account's part of a group. The messages have been handed to their
    /// server: while the database is away, keep trying to record that (a little longer
    /// than an outage of a restart takes) rather than leave them `sending` until the lease
    /// runs out and send them a second time.
    async fn record_retrying(
        &self,
        part: Arc<Vec<(MessageJob, SendOutcome)>>,
        lease: Lease,
        started: std::time::Instant,
    ) {
        let count = part.len();
        loop {
            tokio::time::sleep(RECORD_RETRY_PAUSE).await;
            match self.record_once(std::slice::from_ref(&part), lease).await {
                Ok(()) => return,
                Err(RecordFailure::Unavailable(reason)) if started.elapsed() < RECORD_RETRY_FOR => {
                    tracing::warn!(messages = count, %reason, "recording message outcomes failed; retrying");
                }
                Err(RecordFailure::Unavailable(error) | RecordFailure::Other(error)) => {
                    tracing::warn!(messages = count, %error, "recording message outcomes failed");
                    return;
                }
            }
        }
    }

    /// One transaction recording every outcome of `parts`.
    async fn record_once(
        &self,
        parts: &[Arc<Vec<(MessageJob, SendOutcome)>>],
        lease: Lease,
    ) -> std::result::Result<(), RecordFailure> {
        let shared = self.shared.clone();
        let parts = parts.to_vec();
        let recorded = tokio::task::spawn_blocking(move || {
            let pairs: Vec<_> = parts
                .iter()
                .flat_map(|part| part.iter().map(|(job, outcome)| (job, outcome)))
                .collect();
            record_message_outcomes(&shared.services, &shared.settings, &lease, &pairs)
        })
        .await;
        match recorded {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(
                AppError::Unavailable(reason)
                | AppError::AccountUnavailable(_, reason)
                | AppError::TimedOut(reason),
            )) => Err(RecordFailure::Unavailable(reason)),
            Ok(Err(error)) => Err(RecordFailure::Other(error.to_string())),
            Err(error) => Err(RecordFailure::Other(format!(
                "the record task failed: {error}"
            ))),
        }
    }

    /// Runs claims until `shutdown` turns true, handing each claim's messages to their
    /// lanes without waiting for them: at once again after a full claim while there is
    /// room, otherwise after the idle poll ([`IDLE_POLL`], or [`LISTENING_POLL`] while the
    /// worker hears wake-ups), when messages were queued or when a release lets a claim
    /// take more (see `release`). A failed
    /// claim is logged and retried after a pause. On shutdown it stops claiming and
    /// returns once every message it handed out is recorded.
    pub async fn run(&self, shutdown: watch::Receiver<bool>) {
        let deliveries = &Mutex::new(JoinSet::new());
        let wake = Some(&self.shared.wake);
        run_steps("message delivery claim", shutdown, wake, || async move {
            let Some((lease, claimed, jobs)) = self.claim_and_render().await? else {
                // No room: wait for a release.
                return Ok(Next::Wait(IDLE_POLL * 10));
            };
            let worker = self.clone();
            let mut running = lock(deliveries);
            while running.try_join_next().is_some() {}
            running.spawn(async move { worker.deliver(lease, jobs).await });
            Ok(if claimed >= BATCH_SIZE as usize {
                Next::Again
            } else {
                Next::Wait(self.idle_poll())
            })
        })
        .await;
        let mut running = std::mem::take(&mut *lock(deliveries));
        while running.join_next().await.is_some() {}
    }

    /// Renews the leases of everything the worker holds every third of the lease, until
    /// `shutdown` turns true and nothing is held any more.
    pub async fn renew_leases(&self, shutdown: watch::Receiver<bool>) {
        let every = self.shared.settings.lease / 3;
        loop {
            tokio::time::sleep(every).await;
            let ids: Vec<(AccountId, MessageId)> = lock(&self.shared.held)
                .iter()
                .map(|(id, account)| (*account, *id))
                .collect();
            if ids.is_empty() {
                if *shutdown.borrow() {
                    return;
                }
                continue;
            }
            let shared = self.shared.clone();
            let count = ids.len();
            let renewed = tokio::task::spawn_blocking(move || {
                renew_message_leases(
                    &shared.services,
                    shared.lease_token,
                    &ids,
                    shared.settings.lease,
                )
            })
            .await;
            match renewed {
                Ok(Ok(renewed)) => {
                    tracing::debug!(held = count, renewed, "message leases renewed");
                }
                Ok(Err(error)) => tracing::warn!(%error, "renewing message leases failed"),
                Err(error) => tracing::warn!(%error, "the lease renewal task failed"),
            }
        }
    }

    /// Counts a message into its lane; under the lanes' lock, so a lane is never
    /// forgotten (see [`Self::full_accounts`]) while a message is counted in it.
    fn enter_lane(&self, lane: Lane) -> Arc<LaneState> {
        let mut lanes = lock(&self.shared.lanes);
        let state = lanes.entry(lane).or_insert_with(|| {
            Arc::new(LaneState {
                sessions: Semaphore::new(self.shared.lane_sessions),
                held: AtomicUsize::new(0),
            })
        });
        state.held.fetch_add(1, Ordering::SeqCst);
        state.clone()
    }

    /// How many held messages make a lane full.
    fn lane_full_at(&self) -> usize {
        self.shared.lane_sessions * LANE_BACKLOG
    }

    /// Accounts with a full lane; empty lanes are forgotten on the way.
    fn full_accounts(&self) -> Vec<AccountId> {
        let full = self.lane_full_at();
        let mut lanes = lock(&self.shared.lanes);
        lanes.retain(|_, state| state.held.load(Ordering::SeqCst) > 0);
        let mut accounts: Vec<AccountId> = lanes
            .iter()
            .filter(|(_, state)| state.held.load(Ordering::SeqCst) >= full)
            .map(|(lane, _)| lane.account)
            .collect();
        accounts.sort_unstable();
        accounts.dedup();
        accounts
    }

    /// What a claim from the reserve leaves out: it is for owners who hold nothing, so
    /// every account that holds a message, and every other account known to belong to
    /// the same owner. Keyed by account alone, a user's other accounts would each take
    /// the reserve's share for as many accounts as they may own; an account of theirs
    /// this worker has not claimed for yet still takes one share, after which its owner
    /// is known.
    fn reserve_skips(&self) -> Vec<AccountId> {
        let holding: Vec<AccountId> = lock(&self.shared.held).values().copied().collect();
        let owners = lock(&self.shared.owners);
        let holding_owners: HashSet<UserId> = holding
            .iter()
            .filter_map(|account| owners.get(account).copied())
            .collect();
        let mut skips = holding;
        skips.extend(
            owners
                .iter()
                .filter(|(_, owner)| holding_owners.contains(owner))
                .map(|(account, _)| *account),
        );
        skips
    }

    /// Notes the owners of a claim's accounts.
    fn learn_owners(&self, jobs: &[RenderJob]) {
        let mut owners = lock(&self.shared.owners);
        for job in jobs {
            if let Some(owner) = job.owner() {
                if owners.len() >= MAX_KNOWN_OWNERS && !owners.contains_key(&job.lane.account) {
                    // A bound, not a cache policy: forgetting only lets an account take
                    // one more reserve share before its owner is learnt again.
                    owners.clear();
                }
                owners.insert(job.lane.account, owner);
            }
        }
    }

    fn hold(&self, messages: impl Iterator<Item = (MessageId, AccountId)>) {
        lock(&self.shared.held).extend(messages);
    }

    /// Counts the rendered messages of a claim into the bytes the worker holds.
    fn hold_rendered(&self, jobs: &[MessageJob]) {
        let mut rendered = lock(&self.shared.rendered);
        for job in jobs {
            let size = job.mail.rendered.size();
            if let Some(old) = rendered.sizes.insert(job.message.id, size) {
                rendered.total -= old;
            }
            rendered.total += size;
        }
    }

    /// Forgets held messages, and wakes the waiting claim loops when that lets a claim take
    /// what it could not before: more room in the worker, or any release while only the
    /// reserve was left (an account that now holds nothing may use it). A lane that stops
    /// being full wakes them as its session ends (`deliver`). Any other release would wake
    /// the loops to a claim that skips the same accounts again: under load that was most
    /// claims (5,156 empty of 5,938 in a 100,000-message bench run), each a transaction
    /// for nothing.
    fn release(&self, ids: &[MessageId]) {
        if ids.is_empty() {
            return;
        }
        let mut held = lock(&self.shared.held);
        let before = held.len();
        for id in ids {
            held.remove(id);
        }
        let after = held.len();
        drop(held);
        let bytes_were_full = {
            let mut rendered = lock(&self.shared.rendered);
            let was_full = rendered.total >= MAX_HELD_RENDERED_BYTES;
            for id in ids {
                if let Some(size) = rendered.sizes.remove(id) {
                    rendered.total -= size;
                }
            }
            was_full && rendered.total < MAX_HELD_RENDERED_BYTES
        };
        let room = |held| claim_room(held, MAX_HELD, BATCH_SIZE as usize);
        let was = room(before);
        if was.in_reserve || was != room(after) || bytes_were_full {
            self.shared.wake.notify_waiters();
        }
    }
}

/// A claim's budget of rendered bytes, given back when its messages are rendered (or
/// the claim fails): their own sizes count from then on.
struct Reservation<'a> {
    worker: &'a MessageWorker,
    budget: usize,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut rendered = lock(&self.worker.shared.rendered);
        let was_full = rendered.total >= MAX_HELD_RENDERED_BYTES;
        rendered.total -= self.budget;
        if was_full && rendered.total < MAX_HELD_RENDERED_BYTES {
            self.worker.shared.wake.notify_waiters();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How a session counts in `mailroom_smtp_replies_total`.
fn reply_class(outcome: &SendOutcome) -> SmtpReplyClass {
    match outcome {
        SendOutcome::Accepted(_) => SmtpReplyClass::Accepted,
        SendOutcome::Refused(AttemptFault::Connection(_)) => SmtpReplyClass::Connection,
        SendOutcome::Refused(fault) => match fault.classify() {
            ReplyClass::HardBounce => SmtpReplyClass::HardBounce,
            // A server refusing Mailroom itself (AUTH) is retried like a transient reply.
            ReplyClass::Transient | ReplyClass::ServerFault => SmtpReplyClass::Transient,
            ReplyClass::PermanentFailure | ReplyClass::Accepted => SmtpReplyClass::Permanent,
        },
    }
}

#[cfg(test)]
mod tests {
    use mailroom_app::ports::MailAccepted;
    use mailroom_domain::message::{SmtpReply, SmtpStage};

    use super::*;

    #[test]
    fn sessions_are_counted_by_how_they_ended() {
        let reply = |text: &str| SmtpReply::parse(text).expect("reply");
        let refused = |text: &str| {
            SendOutcome::Refused(AttemptFault::Reply(
                SmtpStage::ContactRecipient,
                reply(text),
            ))
        };
        assert_eq!(
            reply_class(&SendOutcome::Accepted(MailAccepted {
                reply: reply("250 2.0.0 ok"),
                refused_copies: Vec::new(),
                copies: 0,
            })),
            SmtpReplyClass::Accepted
        );
        assert_eq!(
            reply_class(&refused("550 5.1.1 no such user")),
            SmtpReplyClass::HardBounce
        );
        assert_eq!(
            reply_class(&refused("552 5.3.4 too big")),
            SmtpReplyClass::Permanent
        );
        assert_eq!(
            reply_class(&refused("421 4.3.2 closing")),
            SmtpReplyClass::Transient
        );
        assert_eq!(
            reply_class(&SendOutcome::Refused(AttemptFault::Connection(
                "reset".into()
            ))),
            SmtpReplyClass::Connection
        );
        assert_eq!(
            reply_class(&SendOutcome::Refused(AttemptFault::Permanent(
                "egress".into()
            ))),
            SmtpReplyClass::Permanent
        );
    }
}
