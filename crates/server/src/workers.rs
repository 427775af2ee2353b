//! Background workers. Each job exposes a `run_once` step that tests call directly; the
//! runner loops over the steps until shutdown.
//!
//! Registered: webhook delivery ([`crate::webhook_worker`]), message delivery
//! ([`crate::message_worker`]), announcement expansion and completion
//! ([`crate::announcement_worker`]) and the event-name fold ([`crate::event_names_worker`]). On SIGTERM or SIGINT the loops finish their current round
//! (bounded by the webhook and SMTP timeouts) and stop.

use std::{future::Future, time::Duration};

use mailroom_app::Services;
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
