//! Background workers. Each job exposes a `run_once` step that tests call directly; the
//! runner loops over the steps until shutdown.
//!
//! The foundation has no queues yet: the message outbox and webhook deliveries arrive with
//! their issues and register here. Until then the runner only waits for the shutdown
//! signal, so `mailroom worker` already behaves as a deployable process.

use tokio::signal;

/// Runs the registered workers until SIGTERM or SIGINT.
///
/// # Errors
/// When the signal handlers cannot be installed.
pub async fn run_until_shutdown() -> std::io::Result<()> {
    tracing::info!("workers started (no background jobs are registered yet)");
    wait_for_shutdown_signal().await?;
    tracing::info!("workers stopped");
    Ok(())
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
