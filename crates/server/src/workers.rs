//! Background workers. Each job exposes a `run_once` step that tests call directly; the
//! runner loops over the steps until shutdown.
//!
//! Registered: webhook delivery ([`crate::webhook_worker`]), message delivery
//! ([`crate::message_worker`]), announcement expansion and completion
//! ([`crate::announcement_worker`]) and the event-name fold ([`crate::event_names_worker`]). On SIGTERM or SIGINT the loops finish their current round
//! (bounded by the webhook and SMTP timeouts) and stop.

use std::{
    collections::HashMap,
    future::Future,
    time::{Duration, Instant},
};

use mailroom_app::Services;
use mailroom_domain::AccountId;
use tokio::{
    signal,
    sync::{watch, Notify},
};

use crate::{
    announcement_worker::{AnnouncementWorker, BATCH_SIZE as EXPANSION_BATCH},
    event_names_worker::EventNamesWorker,
    message_worker::{MessageWorker, PARALLEL_ROUNDS as MESSAGE_ROUNDS},
    webhook_worker::{WebhookWorker, PARALLEL_ROUNDS},
    Config,
};

/// The part of a worker's bound on held work kept for accounts with nothing held: a
/// quarter. Accounts cost nothing to create, so without it one user's many accounts with
/// hanging endpoints or stalled mail servers could hold the whole bound
/// (docs/operations.md, "Delivery engine").
const RESERVE_SHARE: usize = 4;

/// The most a claim takes from the reserve.
pub const RESERVE_CLAIM: usize = 16;

/// What the next claim of a worker may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimRoom {
    /// How many items it may claim (0: none).
    pub room: usize,
    /// Only the reserve is left: the claim must skip every account that holds anything.
    pub in_reserve: bool,
}

/// The room of the next claim of a worker that holds `held` items of at most `bound`,
/// claiming up to `batch` at a time: outside the reserve, up to its edge (so the reserve
/// is whole when claims reach it); inside, at most [`RESERVE_CLAIM`].
pub fn claim_room(held: usize, bound: usize, batch: usize) -> ClaimRoom {
    let reserve = bound / RESERVE_SHARE;
    let left = bound.saturating_sub(held);
    if left <= reserve {
        ClaimRoom {
            room: left.min(RESERVE_CLAIM),
            in_reserve: true,
        }
    } else {
        ClaimRoom {
            room: (left - reserve).min(batch),
            in_reserve: false,
        }
    }
}

/// Runs the registered workers until SIGTERM or SIGINT.
///
/// # Errors
/// When the signal handlers cannot be installed.
pub async fn run_until_shutdown(services: Services, config: &Config) -> std::io::Result<()> {
    let (stop, stopped) = watch::channel(false);
    let messages = MessageWorker::new(services.clone(), config);
    let announcements = AnnouncementWorker::new(services.clone(), EXPANSION_BATCH);
    let event_names = EventNamesWorker::new(services.clone());
    let webhooks = WebhookWorker::new(services, config);
    let mut loops: Vec<_> = (0..PARALLEL_ROUNDS)
        .map(|_| {
            let (worker, stopped) = (webhooks.clone(), stopped.clone());
            tokio::spawn(async move { worker.run(stopped).await })
        })
        .collect();
    loops.extend((0..MESSAGE_ROUNDS).map(|_| {
        let (worker, stopped) = (messages.clone(), stopped.clone());
        tokio::spawn(async move { worker.run(stopped).await })
    }));
    loops.push({
        let (worker, stopped) = (messages.clone(), stopped.clone());
        tokio::spawn(async move { worker.renew_leases(stopped).await })
    });
    // Runs until the process ends: it holds no work, so shutdown need not wait for it.
    let listener = tokio::spawn(mailroom_postgres::listen_for_queued_messages(
        config.database_url.clone(),
        {
            let worker = messages.clone();
            move |event| worker.hear(event)
        },
    ));
    loops.push({
        let stopped = stopped.clone();
        tokio::spawn(async move { announcements.run(stopped).await })
    });
    loops.push({
        let stopped = stopped.clone();
        tokio::spawn(async move { event_names.run(stopped).await })
    });
    tracing::info!(
        webhook_rounds = PARALLEL_ROUNDS,
        message_rounds = MESSAGE_ROUNDS,
        "workers started: webhook and message delivery, announcement expansion, event-name fold"
    );
    wait_for_shutdown_signal().await?;
    let _ = stop.send(true);
    listener.abort();
    for handle in loops {
        let _ = handle.await;
    }
    tracing::info!("workers stopped");
    Ok(())
}

/// What a worker loop does after one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Step again at once (the step found a full batch).
    Again,
    /// Wait this long, or until the loop's wake-up is signalled, or shutdown.
    Wait(Duration),
}

/// How long a loop waits after a failed step.
pub const FAILED_STEP_PAUSE: Duration = Duration::from_secs(1);

/// How long claims leave out an account whose rows could not be reached.
pub const UNREACHABLE_ACCOUNT_PAUSE: Duration = Duration::from_secs(5);

/// Accounts whose claim failed because their part of the store was away (a Citus worker
/// node stopped, or a shard of theirs locked by a move past the statement timeout).
/// Claims leave each out for [`UNREACHABLE_ACCOUNT_PAUSE`] and then try it again: every
/// claim locks the earliest-due lanes first, so without this one account on a stopped node
/// would fail every claim, and no account on the other nodes would send.
#[derive(Default)]
pub struct UnreachableAccounts(std::sync::Mutex<HashMap<AccountId, Instant>>);

impl UnreachableAccounts {
    /// Leaves `account` out of claims for the pause, from now.
    pub fn note(&self, account: AccountId) {
        self.lock()
            .insert(account, Instant::now() + UNREACHABLE_ACCOUNT_PAUSE);
    }

    /// The accounts left out now; those whose pause ended are forgotten.
    pub fn current(&self) -> Vec<AccountId> {
        let now = Instant::now();
        let mut accounts = self.lock();
        accounts.retain(|_, until| *until > now);
        accounts.keys().copied().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<AccountId, Instant>> {
        // A panic while holding it leaves a map that is still whole.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The one loop every worker runs (messages, webhooks, announcements): calls `step` until
/// `shutdown` turns true, pausing as the step says; a step that fails is logged (`what`
/// names it) and tried again after [`FAILED_STEP_PAUSE`]. `wake`, when given, ends a
/// pause early (a delivery worker signals it when held work is released).
pub async fn run_steps<F, Fut>(
    what: &'static str,
    mut shutdown: watch::Receiver<bool>,
    wake: Option<&Notify>,
    mut step: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Next>>,
{
    while !*shutdown.borrow() {
        let pause = match step().await {
            Ok(Next::Again) => continue,
            Ok(Next::Wait(pause)) => pause,
            Err(error) => {
                tracing::warn!(
                    step = what,
                    error = format!("{error:#}"),
                    "worker step failed"
                );
                FAILED_STEP_PAUSE
            }
        };
        let woken = async {
            match wake {
                Some(wake) => wake.notified().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = woken => {}
            _ = shutdown.changed() => {}
        }
    }
}

/// Resolves on SIGTERM or SIGINT.
///
/// # Errors
/// When the signal handlers cannot be installed.
pub async fn wait_for_shutdown_signal() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        let mut terminate = signal::unix::signal(signal::unix::SignalKind::terminate())?;
        tokio::select! {
            result = signal::ctrl_c() => result,
            _ = terminate.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        signal::ctrl_c().await
    }
}

#[cfg(test)]
mod tests {
    use super::{claim_room, ClaimRoom, RESERVE_CLAIM};

    #[test]
    fn claims_stop_at_the_reserve_and_take_little_from_it() {
        let whole = |room| ClaimRoom {
            room,
            in_reserve: false,
        };
        let reserve = |room| ClaimRoom {
            room,
            in_reserve: true,
        };
        assert_eq!(claim_room(0, 512, 128), whole(128));
        assert_eq!(claim_room(374, 512, 128), whole(10));
        assert_eq!(claim_room(384, 512, 128), reserve(RESERVE_CLAIM));
        assert_eq!(claim_room(509, 512, 128), reserve(3));
        assert_eq!(claim_room(512, 512, 128), reserve(0));
        assert_eq!(claim_room(600, 512, 128), reserve(0));
    }
}
