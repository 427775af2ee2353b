//! The webhook delivery worker: [`WebhookWorker::run_once`] is one round (claim, send,
//! record) that tests call directly; [`WebhookWorker::run`] claims until shutdown, handing
//! each claim's deliveries out without waiting for them.
//!
//! Fairness between accounts (each account has one endpoint): an attempt is recorded as
//! soon as it ends, nothing waits for a whole claim, and no account has more than
//! [`ACCOUNT_IN_FLIGHT`] attempts in flight in this process: a claim serves a few due
//! accounts (lanes), each up to its room, and skips an account at the bound until some
//! attempts end. A hanging endpoint therefore holds only its own account's events (each
//! attempt bounded by the webhook timeout), never another account's.
//!
//! Accounts cost nothing to create, so one user's several accounts with hanging endpoints
//! could together fill the process's [`MAX_IN_FLIGHT`]. Its last quarter is therefore kept
//! for accounts with nothing in flight ([`crate::workers::claim_room`]): once the rest is
//! taken, claims skip every account that has an attempt in flight and take a few events
//! each, so an account whose endpoint answers still gets its events out
//! (docs/operations.md, "Delivery engine", "Webhooks").
//!
//! The database steps are synchronous (diesel) and run on the blocking pool; the sends run
//! concurrently on the async runtime with no transaction open.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::{Context, Result};
use futures_util::future::join_all;
use mailroom_app::{
    ports::Lease,
    webhook_events::{
        claim_webhook_deliveries, record_webhook_attempts, send_webhook_delivery, AccountRoom,
        AttemptReport, ClaimedDelivery, DeliveryRound, DeliverySettings,
    },
    AppError, Services,
};
use mailroom_domain::{webhook_event::RetrySchedule, AccountId};
use tokio::{
    sync::{mpsc, watch, Notify},
    task::JoinSet,
};

use crate::{
    metrics::delivery_counters,
    workers::{claim_room, run_steps, ClaimRoom, Next, UnreachableAccounts},
    Config,
};

/// The most events one claim takes.
pub const BATCH_SIZE: u32 = 128;
/// Claim loops one process runs side by side (each claims its own events, `SKIP
/// LOCKED`, as separate processes would).
pub const PARALLEL_ROUNDS: usize = 4;
/// The most attempts one process has in flight.
pub const MAX_IN_FLIGHT: usize = BATCH_SIZE as usize * 4;
/// The most attempts in flight for one account's endpoint; beyond it, claims skip the
/// account.
pub const ACCOUNT_IN_FLIGHT: usize = 64;
/// The most events an account with nothing in flight takes from the reserve in one claim.
pub const RESERVE_PER_ACCOUNT: usize = 2;
/// How long an idle loop waits before looking for due events again.
pub const IDLE_POLL: Duration = Duration::from_millis(50);

#[derive(Default)]
struct InFlight {
    by_account: HashMap<AccountId, usize>,
    reserved: usize,
}

struct Shared {
    services: Services,
    settings: DeliverySettings,
    /// Attempts in flight by account, and room reserved by claims under way (so claims
    /// running side by side never take more than the bound together).
    in_flight: Mutex<InFlight>,
    /// Signalled when attempts end.
    released: Notify,
    /// Claims of this process run one at a time, so each sees the accounts the previous
    /// one saturated (the sends run side by side).
    claiming: tokio::sync::Mutex<()>,
    /// Accounts claims leave out for now: their part of the store was away.
    unreachable: UnreachableAccounts,
}

/// Runs webhook delivery.
#[derive(Clone)]
pub struct WebhookWorker {
    shared: Arc<Shared>,
}

impl WebhookWorker {
    /// A worker with the configuration's retry schedule. The lease outlasts two attempt
    /// timeouts plus a margin, so a live worker never loses its events: an attempt starts
    /// as soon as it is claimed, takes at most one timeout, and is recorded at once.
    pub fn new(services: Services, config: &Config) -> Self {
        let settings = DeliverySettings {
            schedule: RetrySchedule::from_secs(&config.webhook_retry_schedule),
            lease: config.webhook_timeout * 2 + Duration::from_secs(30),
            batch_size: BATCH_SIZE,
        };
        Self {
            shared: Arc::new(Shared {
                services,
                settings,
                in_flight: Mutex::new(InFlight::default()),
                released: Notify::new(),
                claiming: tokio::sync::Mutex::new(()),
                unreachable: UnreachableAccounts::default(),
            }),
        }
    }

    /// The settings rounds run with.
    pub fn settings(&self) -> &DeliverySettings {
        &self.shared.settings
    }

    /// One round, start to end: claims the due events (skipping saturated accounts), sends
    /// them concurrently, records each attempt as it ends; returns when all are recorded.
    ///
    /// # Errors
    /// When the claim fails.
    pub async fn run_once(&self) -> Result<DeliveryRound> {
        let Some((lease, deliveries)) = self.claim().await? else {
            return Ok(DeliveryRound::default());
        };
        Ok(self.deliver(lease, deliveries).await)
    }

    async fn claim(&self) -> Result<Option<(Lease, Vec<ClaimedDelivery>)>> {
        let _one_at_a_time = self.shared.claiming.lock().await;
        let (room, account_room) = {
            let mut in_flight = lock(&self.shared.in_flight);
            let held = in_flight.by_account.values().sum::<usize>() + in_flight.reserved;
            let ClaimRoom { room, in_reserve } =
                claim_room(held, MAX_IN_FLIGHT, BATCH_SIZE as usize);
            let mut account_room = account_room(&in_flight.by_account, in_reserve);
            account_room.skip.extend(self.shared.unreachable.current());
            in_flight.reserved += room;
            (room, account_room)
        };
        if room == 0 {
            return Ok(None);
        }
        let shared = self.shared.clone();
        let mut settings = shared.settings.clone();
        settings.batch_size = u32::try_from(room).unwrap_or(BATCH_SIZE);
        let claimed = tokio::task::spawn_blocking(move || {
            claim_webhook_deliveries(&shared.services, &settings, &account_room)
        })
        .await;
        let mut in_flight = lock(&self.shared.in_flight);
        in_flight.reserved -= room;
        let batch = claimed.context("the claim task")?.map_err(|error| {
            if let AppError::AccountUnavailable(account, _) = &error {
                self.shared.unreachable.note(*account);
            }
            anyhow::anyhow!("claiming webhook events: {error}")
        })?;
        for delivery in &batch.deliveries {
            *in_flight
                .by_account
                .entry(delivery.event.account_id)
                .or_default() += 1;
        }
        drop(in_flight);
        Ok(Some((batch.lease, batch.deliveries)))
    }

    /// Sends `deliveries` concurrently and records attempts as they end (those that ended
    /// while the previous record ran go together in one transaction).
    async fn deliver(&self, lease: Lease, deliveries: Vec<ClaimedDelivery>) -> DeliveryRound {
        let mut round = DeliveryRound {
            claimed: deliveries.len(),
            ..DeliveryRound::default()
        };
        if deliveries.is_empty() {
            return round;
        }
        let (finished, mut reports) = mpsc::unbounded_channel::<AttemptReport>();
        let sends = async move {
            join_all(deliveries.into_iter().map(|delivery| {
                let finished = finished.clone();
                async move {
                    let report = send_webhook_delivery(&self.shared.services, delivery).await;
                    let _ = finished.send(report);
                }
            }))
            .await;
        };
        let recorder = async {
            while let Some(first) = reports.recv().await {
                let mut group = vec![first];
                while let Ok(next) = reports.try_recv() {
                    group.push(next);
                }
                let accounts: Vec<AccountId> =
                    group.iter().map(AttemptReport::account_id).collect();
                let (shared, count) = (self.shared.clone(), group.len());
                let recorded = tokio::task::spawn_blocking(move || {
                    record_webhook_attempts(&shared.services, &shared.settings, &lease, group)
                })
                .await;
                match recorded {
                    Ok(Ok(part)) => {
                        delivery_counters().webhook_deliveries(
                            part.delivered,
                            part.retrying,
                            part.failed,
                        );
                        round.delivered += part.delivered;
                        round.retrying += part.retrying;
                        round.failed += part.failed;
                        round.lost += part.lost;
                    }
                    // The events stay leased until the lease runs out and are attempted
                    // again.
                    Ok(Err(error)) => {
                        tracing::warn!(events = count, %error, "recording webhook attempts failed");
                    }
                    Err(error) => tracing::warn!(events = count, %error, "the record task failed"),
                }
                self.release(&accounts);
            }
        };
        tokio::join!(sends, recorder);
        round
    }

    fn release(&self, accounts: &[AccountId]) {
        let mut in_flight = lock(&self.shared.in_flight);
        for account in accounts {
            if let Some(count) = in_flight.by_account.get_mut(account) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    in_flight.by_account.remove(account);
                }
            }
        }
        drop(in_flight);
        self.shared.released.notify_waiters();
    }

    /// Claims until `shutdown` turns true, handing each claim's deliveries out without
    /// waiting: at once again after a full claim, otherwise after [`IDLE_POLL`] (or when
    /// attempts end, if the process is saturated). A failed claim is logged and retried
    /// after a pause. On shutdown it stops claiming and returns once every attempt it
    /// started is recorded.
    pub async fn run(&self, shutdown: watch::Receiver<bool>) {
        let deliveries = &Mutex::new(JoinSet::new());
        let wake = Some(&self.shared.released);
        run_steps("webhook delivery claim", shutdown, wake, || async move {
            let Some((lease, batch)) = self.claim().await? else {
                // Saturated: wait for attempts to end.
                return Ok(Next::Wait(IDLE_POLL * 10));
            };
            let full = batch.len() >= BATCH_SIZE as usize;
            let worker = self.clone();
            let mut running = lock(deliveries);
            while running.try_join_next().is_some() {}
            running.spawn(async move {
                worker.deliver(lease, batch).await;
            });
            Ok(if full {
                Next::Again
            } else {
                Next::Wait(IDLE_POLL)
            })
        })
        .await;
        let mut running = std::mem::take(&mut *lock(deliveries));
        while running.join_next().await.is_some() {}
    }
}

/// What each account may take in the next claim, from the attempts this process has in
/// flight per account: an account at [`ACCOUNT_IN_FLIGHT`] is skipped, one below it may
/// take the difference, one with nothing in flight the whole bound. In the reserve (the
/// last quarter of [`MAX_IN_FLIGHT`]) only accounts with nothing in flight are served, and
/// each takes at most [`RESERVE_PER_ACCOUNT`]: a hanging endpoint then holds that little of
/// the reserve before it is skipped, so it takes many such accounts to fill it, while an
/// answering endpoint is served again as soon as its attempts end.
fn account_room(by_account: &HashMap<AccountId, usize>, in_reserve: bool) -> AccountRoom {
    let mut room = AccountRoom {
        fresh: if in_reserve {
            RESERVE_PER_ACCOUNT
        } else {
            ACCOUNT_IN_FLIGHT
        } as u32,
        ..AccountRoom::default()
    };
    for (account, held) in by_account {
        let left = ACCOUNT_IN_FLIGHT.saturating_sub(*held);
        if left == 0 || (in_reserve && *held > 0) {
            room.skip.push(*account);
        } else if *held > 0 {
            room.left.insert(*account, left as u32);
        }
    }
    room
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use mailroom_domain::{AccountId, Uuid};

    use super::{account_room, ACCOUNT_IN_FLIGHT, RESERVE_PER_ACCOUNT};

    fn account(n: u128) -> AccountId {
        AccountId::from_uuid(Uuid::from_u128(n))
    }

    #[test]
    fn an_account_takes_at_most_what_its_bound_leaves() {
        let held = HashMap::from([
            (account(1), ACCOUNT_IN_FLIGHT),
            (account(2), 60),
            (account(3), 0),
        ]);
        let room = account_room(&held, false);
        assert_eq!(room.skip, vec![account(1)]);
        assert_eq!(
            room.left.get(&account(2)),
            Some(&((ACCOUNT_IN_FLIGHT - 60) as u32))
        );
        assert_eq!(
            room.left.get(&account(3)),
            None,
            "nothing in flight: the whole bound"
        );
        assert_eq!(room.fresh, ACCOUNT_IN_FLIGHT as u32);
    }

    #[test]
    fn the_reserve_serves_only_accounts_with_nothing_in_flight_a_few_each() {
        let held = HashMap::from([(account(1), 1), (account(2), ACCOUNT_IN_FLIGHT)]);
        let mut room = account_room(&held, true);
        room.skip.sort();
        assert_eq!(room.skip, vec![account(1), account(2)]);
        assert!(room.left.is_empty());
        assert_eq!(room.fresh, RESERVE_PER_ACCOUNT as u32);
    }
}
