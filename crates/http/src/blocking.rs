//! The one place handlers cross from async to the blocking pool.

use mailroom_app::AppError;

use crate::problem::ApiError;

/// Runs a synchronous use case (diesel is blocking) on tokio's blocking pool, inside the
/// caller's tracing span. A panic in the use case is re-raised here, so it is reported as
/// the panic it is rather than swallowed as a generic error.
///
/// # Errors
/// The use case's error as an [`ApiError`].
pub async fn run_blocking<F, R>(work: F) -> Result<R, ApiError>
where
    F: FnOnce() -> Result<R, AppError> + Send + 'static,
    R: Send + 'static,
{
    let span = tracing::Span::current();
    match tokio::task::spawn_blocking(move || span.in_scope(work)).await {
        Ok(result) => result.map_err(ApiError::from),
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(_) => Err(AppError::Unavailable("the server is shutting down".into()).into()),
    }
}
