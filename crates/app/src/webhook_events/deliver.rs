use std::{
    collections::{hash_map::Entry, HashMap},
    time::Duration,
};

use mailroom_domain::{
    webhook::{WebhookAuthType, WebhookConfig},
    webhook_event::{
        AttemptVerdict, RetrySchedule, WebhookEvent, WebhookEventStatus, WebhookTarget,
    },
    AccountId, Timestamp,
};

use crate::{
    accounts::open_webhook_config,
    ports::{in_transaction, Lease, SendError, WebhookAnswer, WebhookAuth, WebhookRequest},
    AppError, Services,
};

/// How the delivery worker runs.
#[derive(Debug, Clone)]
pub struct DeliverySettings {
    /// Intervals between attempts.
    pub schedule: RetrySchedule,
    /// How long a claim holds. Longer than the sender's timeout, so a live worker never
    /// loses the events it is still sending.
    pub lease: Duration,
    /// The most events claimed (and sent concurrently) per round.
    pub batch_size: u32,
}

/// The configuration a claimed event will be delivered with.
#[derive(Debug, Clone)]
enum Destination {
    Ready(Box<WebhookConfig>),
    /// The account has no webhook configuration any more: nothing to deliver to.
    Missing,
    /// The stored configuration cannot be opened (e.g. `MAILROOM_SECRET_KEY` changed);
    /// the operator can fix that, so the event is retried on its schedule.
    Unreadable(String),
}

/// One claimed event and where it goes.
#[derive(Debug, Clone)]
pub struct ClaimedDelivery {
    /// The event as claimed.
    pub event: WebhookEvent,
    destination: Destination,
}

/// The events one worker round claimed under one lease.
#[derive(Debug, Clone)]
pub struct ClaimedBatch {
    /// The lease the worker holds on them.
    pub lease: Lease,
    /// The events.
    pub deliveries: Vec<ClaimedDelivery>,
}

#[derive(Debug, Clone)]
enum AttemptResult {
    Answered(WebhookAnswer),
    NotSent(SendError),
    NoDestination { permanent: bool, reason: String },
}

/// How one attempt went, ready to be recorded.
#[derive(Debug, Clone)]
pub struct AttemptReport {
    event: WebhookEvent,
    target: Option<WebhookTarget>,
    attempted_at: Timestamp,
    finished_at: Timestamp,
    result: AttemptResult,
}

impl AttemptReport {
    /// The account whose event was attempted.
    pub fn account_id(&self) -> AccountId {
        self.event.account_id
    }
}

/// What a worker round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeliveryRound {
    /// Events claimed.
    pub claimed: usize,
    /// Now `delivered`.
    pub delivered: usize,
    /// Now `retrying`.
    pub retrying: usize,
    /// Now `failed`.
    pub failed: usize,
    /// Not recorded because the lease ran out first (another worker has them now).
    pub lost: usize,
}

/// The most webhook lanes (accounts) one claim serves; each gets an equal share of the
/// claim's limit, and no more than its [`AccountRoom`].
pub const LANES_PER_CLAIM: u32 = 16;

/// How many events each account may take in one claim: the claiming worker's bound on
/// one endpoint's attempts in flight, less what it already has in flight there.
#[derive(Debug, Clone)]
pub struct AccountRoom {
    /// Accounts left out of the claim (no room).
    pub skip: Vec<AccountId>,
    /// How many more events each account with attempts in flight may take.
    pub left: HashMap<AccountId, u32>,
    /// How many events an account with nothing in flight may take.
    pub fresh: u32,
}

impl Default for AccountRoom {
    /// No bound per account: only the claim's limit and its share of it.
    fn default() -> Self {
        Self {
            skip: Vec::new(),
            left: HashMap::new(),
            fresh: u32::MAX,
        }
    }
}

impl AccountRoom {
    fn of(&self, account: AccountId) -> u32 {
        self.left.get(&account).copied().unwrap_or(self.fresh)
    }
}

/// Claims due events (up to the batch size) under a fresh lease, with the configuration
/// each will be delivered with, in one short transaction: up to [`LANES_PER_CLAIM`] due
/// lanes (accounts) but those `room` skips, then each account's events with its account in
/// the WHERE clause, at most its share of the batch and its room (docs/operations.md,
/// "Delivery engine", "Webhooks").
///
/// # Errors
/// [`AppError`] from the store.
pub fn claim_webhook_deliveries(
    services: &Services,
    settings: &DeliverySettings,
    room: &AccountRoom,
) -> Result<ClaimedBatch, AppError> {
    let now = services.clock.now();
    let lease = Lease {
        token: services.ids.next_uuid(),
        until: now.plus(time::Duration::try_from(settings.lease).unwrap_or(time::Duration::MAX)),
    };
    let secrets = services.secrets.as_ref();
    let deliveries = in_transaction(services.db.as_ref(), |tx| {
        // No more lanes than events the claim may take: each lane takes at least one, so
        // more lanes would take the worker past its bound.
        let lanes =
            tx.lock_due_webhook_lanes(now, LANES_PER_CLAIM.min(settings.batch_size), &room.skip)?;
        let mut events = Vec::new();
        // Whether each lane's claim took all it was allowed (more may be waiting, so the
        // lane stays due now); the others' next due time is looked up.
        let mut served: Vec<(AccountId, bool)> = Vec::with_capacity(lanes.len());
        if let Ok(count) = u32::try_from(lanes.len()) {
            let share = settings.batch_size.checked_div(count).unwrap_or(0).max(1);
            for account in lanes {
                let allowed = share.min(room.of(account));
                let claimed = if allowed == 0 {
                    Vec::new()
                } else {
                    tx.claim_due_webhook_events(account, now, &lease, allowed)
                        .map_err(|error| error.of_account(account))?
                };
                served.push((account, claimed.len() >= allowed as usize));
                events.extend(claimed);
            }
        }
        tx.reschedule_webhook_lanes(&served, now)?;
        events.sort_by_key(|event| (event.next_attempt_at, event.id));
        let mut destinations: HashMap<AccountId, Destination> = HashMap::new();
        let mut deliveries = Vec::with_capacity(events.len());
        for event in events {
            let account = event.account_id;
            if let Entry::Vacant(slot) = destinations.entry(account) {
                let destination = match tx.find_webhook_config(account)? {
                    None => Destination::Missing,
                    Some(stored) => match open_webhook_config(secrets, account, stored) {
                        Ok(config) => Destination::Ready(Box::new(config)),
                        Err(error) => Destination::Unreadable(error.to_string()),
                    },
                };
                slot.insert(destination);
            }
            let destination = destinations
                .get(&account)
                .cloned()
                .unwrap_or(Destination::Missing);
            deliveries.push(ClaimedDelivery { event, destination });
        }
        Ok(deliveries)
    })?;
    Ok(ClaimedBatch { lease, deliveries })
}

/// Makes one attempt: the signed POST to the configured URL, with no transaction open.
/// Never fails: whatever happens is reported for [`record_webhook_attempts`].
pub async fn send_webhook_delivery(
    services: &Services,
    delivery: ClaimedDelivery,
) -> AttemptReport {
    let ClaimedDelivery { event, destination } = delivery;
    let attempted_at = services.clock.now();
    let (target, result) = match destination {
        Destination::Ready(config) => {
            let request = WebhookRequest {
                url: config.url.clone(),
                event_id: event.id,
                timestamp: attempted_at,
                body: event.body(),
                signing_secret: config.signing_secret.clone(),
                auth: auth_of(&config),
            };
            let result = match services.webhook_sender.send(&request).await {
                Ok(answer) => AttemptResult::Answered(answer),
                Err(error) => AttemptResult::NotSent(error),
            };
            (Some(WebhookTarget::of(&config)), result)
        }
        Destination::Missing => (
            None,
            AttemptResult::NoDestination {
                permanent: true,
                reason: "the account has no webhook configuration".to_owned(),
            },
        ),
        Destination::Unreadable(reason) => (
            None,
            AttemptResult::NoDestination {
                permanent: false,
                reason: format!("the webhook configuration cannot be read: {reason}"),
            },
        ),
    };
    AttemptReport {
        event,
        target,
        attempted_at,
        finished_at: services.clock.now(),
        result,
    }
}

fn auth_of(config: &WebhookConfig) -> WebhookAuth {
    match (config.auth_type, &config.password_or_token) {
        (WebhookAuthType::Basic, Some(password)) => WebhookAuth::Basic {
            username: config.username.clone().unwrap_or_default(),
            password: password.clone(),
        },
        (WebhookAuthType::Bearer, Some(token)) => WebhookAuth::Bearer {
            token: token.clone(),
        },
        // Validation stores credentials for basic and bearer; without them there is
        // nothing to send, and the signature still proves the origin.
        _ => WebhookAuth::None,
    }
}

/// Records the attempts of one round in one short transaction: each event's `tryCount`
/// grows by one, its target is refreshed, and it becomes `delivered`, `retrying` (due
/// again after the schedule's interval, or the endpoint's `Retry-After` when longer) or
/// `failed` (schedule spent, 410, or a refused target). An event whose lease ran out is
/// left to the worker that holds it now.
///
/// # Errors
/// [`AppError`] from the store; the events then stay leased until the lease runs out and
/// are attempted again.
pub fn record_webhook_attempts(
    services: &Services,
    settings: &DeliverySettings,
    lease: &Lease,
    reports: Vec<AttemptReport>,
) -> Result<DeliveryRound, AppError> {
    let settled: Vec<WebhookEvent> = reports
        .into_iter()
        .map(|report| settle(report, &settings.schedule))
        .collect();
    in_transaction(services.db.as_ref(), |tx| {
        let mut round = DeliveryRound {
            claimed: settled.len(),
            ..DeliveryRound::default()
        };
        for event in &settled {
            if !tx.record_webhook_attempt(event, lease.token)? {
                tracing::warn!(
                    event_id = %event.id, account_id = %event.account_id,
                    "webhook lease ran out before the attempt was recorded; another worker has the event"
                );
                round.lost += 1;
                continue;
            }
            match event.status {
                WebhookEventStatus::Delivered => round.delivered += 1,
                WebhookEventStatus::Retrying | WebhookEventStatus::Queued => round.retrying += 1,
                WebhookEventStatus::Failed => round.failed += 1,
            }
        }
        Ok(round)
    })
}

/// The event after the attempt in `report`.
fn settle(report: AttemptReport, schedule: &RetrySchedule) -> WebhookEvent {
    let AttemptReport {
        mut event,
        target,
        attempted_at,
        finished_at,
        result,
    } = report;
    event.try_count = event.try_count.saturating_add(1);
    event.last_attempt_at = Some(attempted_at);
    if let Some(target) = target {
        event.target = target;
    }
    let (verdict, status_code, error) = match result {
        AttemptResult::Answered(answer) => {
            let verdict = AttemptVerdict::of_status(answer.status, answer.retry_after);
            let error = (verdict != AttemptVerdict::Delivered).then(|| describe_answer(&answer));
            (verdict, Some(answer.status), error)
        }
        AttemptResult::NotSent(error) => {
            let verdict = if error.is_permanent() {
                AttemptVerdict::Permanent
            } else {
                AttemptVerdict::Retry { not_before: None }
            };
            (verdict, None, Some(error.to_string()))
        }
        AttemptResult::NoDestination { permanent, reason } => {
            let verdict = if permanent {
                AttemptVerdict::Permanent
            } else {
                AttemptVerdict::Retry { not_before: None }
            };
            (verdict, None, Some(reason))
        }
    };
    let settlement = schedule.settle(event.try_count, verdict, finished_at);
    event.status = settlement.status;
    event.next_attempt_at = settlement.next_attempt_at;
    event.last_status_code = status_code;
    event.last_error = error;
    event.delivered_at =
        (settlement.status == WebhookEventStatus::Delivered).then_some(finished_at);
    match &event.last_error {
        None => tracing::debug!(
            event_id = %event.id, account_id = %event.account_id, try_count = event.try_count,
            "webhook delivered"
        ),
        Some(error) => tracing::info!(
            event_id = %event.id, account_id = %event.account_id, try_count = event.try_count,
            status = event.status.as_str(), error = %error,
            "webhook attempt failed"
        ),
    }
    event
}

/// The record's `lastError` for a non-2xx answer: the status, why it is not followed or
/// retried where that is not obvious, and the start of the body.
fn describe_answer(answer: &WebhookAnswer) -> String {
    let mut text = match answer.status {
        300..=399 => format!(
            "the endpoint answered {} (redirects are not followed)",
            answer.status
        ),
        410 => "the endpoint answered 410 Gone: no further attempts".to_owned(),
        status => format!("the endpoint answered {status}"),
    };
    if let (429 | 503, Some(after)) = (answer.status, answer.retry_after) {
        text.push_str(&format!(" with Retry-After {} s", after.as_secs()));
    }
    let excerpt = answer.body_excerpt.trim();
    if !excerpt.is_empty() {
        text.push_str(": ");
        text.push_str(excerpt);
    }
    text
}
