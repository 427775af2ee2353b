//! How the message worker runs, and the jitter of its retries: read by the claim and by
//! the delivery alike.

use std::time::Duration;

use crate::Services;

/// How the message worker runs.
#[derive(Debug, Clone)]
pub struct DeliverySettings {
    /// How long a claim holds unless renewed: the worker renews the leases of everything
    /// it holds well before they run out, so a crashed worker's messages are taken back
    /// soon after this.
    pub lease: Duration,
    /// The most messages claimed (and sent concurrently) per round.
    pub batch_size: u32,
    /// Attempts a message gets before a transient failure becomes `failed`.
    pub max_attempts: u32,
    /// Messages an account may send per UTC calendar month; `None` is no limit. Beyond
    /// it, messages are `skipped` with `free_limit_capped` (see `send_limit`).
    pub monthly_send_limit: Option<u64>,
}

/// A uniform draw from `[0, 1)` for the backoff's jitter.
pub(super) fn jitter(services: &Services) -> f64 {
    let mut bytes = [0u8; 8];
    services.secrets.fill_random(&mut bytes);
    // The top 53 bits fill an f64 mantissa exactly.
    #[allow(clippy::cast_precision_loss)]
    let draw = (u64::from_le_bytes(bytes) >> 11) as f64;
    draw / (1u64 << 53) as f64
}
