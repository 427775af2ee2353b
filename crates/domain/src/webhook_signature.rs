//! Standard Webhooks signatures (<https://www.standardwebhooks.com/>): how Mailroom signs
//! each delivery, and how a receiver verifies one.
//!
//! A delivery carries three headers:
//!
//! - `webhook-id`: the event's id, the same on every automatic retry of the event (receivers
//!   use it to drop duplicates);
//! - `webhook-timestamp`: the attempt time in whole seconds since the Unix epoch;
//! - `webhook-signature`: `v1,` followed by the base64 of HMAC-SHA256 over
//!   `"{webhook-id}.{webhook-timestamp}.{body}"`, keyed with the base64-decoded part of the
//!   signing secret after `whsec_`. The header may list several space-separated signatures
//!   (for example during a key rotation); one valid `v1` signature is enough.
//!
//! The timestamp is signed too, so a captured delivery cannot be replayed later than the
//! receiver's tolerance allows.
//!
//! Receivers written in Rust can use [`verify`] as it is; it needs the raw body bytes
//! exactly as they arrived (re-serialising the JSON changes them and breaks the signature).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::webhook::{SigningSecret, SIGNING_SECRET_PREFIX};

type HmacSha256 = Hmac<Sha256>;

/// The signature scheme this module produces and accepts (symmetric HMAC-SHA256).
pub const SIGNATURE_VERSION: &str = "v1";

/// The timestamp tolerance Standard Webhooks recommends: five minutes either way.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(5 * 60);

/// The header that carries the message id.
pub const ID_HEADER: &str = "webhook-id";
/// The header that carries the attempt time (Unix seconds).
pub const TIMESTAMP_HEADER: &str = "webhook-timestamp";
/// The header that carries the signature list.
pub const SIGNATURE_HEADER: &str = "webhook-signature";

/// Why [`verify`] refused a delivery.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The secret is not base64 (optionally after `whsec_`), or is empty.
    #[error("the signing secret is not 'whsec_' followed by base64")]
    InvalidSecret,
    /// The timestamp header is not a whole number of seconds.
    #[error("the webhook-timestamp header is not a number of seconds")]
    InvalidTimestamp,
    /// The timestamp is older than the tolerance allows (a replay, or a very late delivery).
    #[error("the webhook-timestamp is too old")]
    TimestampTooOld,
    /// The timestamp is further in the future than the tolerance allows.
    #[error("the webhook-timestamp is too far in the future")]
    TimestampTooNew,
    /// No `v1` signature in the header matches the body.
    #[error("no signature matches")]
    NoMatchingSignature,
}

/// Signs a delivery: the value of the `webhook-signature` header, `v1,<base64>`.
///
/// `timestamp` is the value sent as `webhook-timestamp` (Unix seconds).
pub fn sign(secret: &SigningSecret, msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    let mac = keyed_mac(&secret.key_bytes(), msg_id, &timestamp.to_string(), body);
    let digest = mac.finalize().into_bytes();
    format!(
        "{SIGNATURE_VERSION},{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// Verifies a Standard Webhooks delivery.
///
/// - `msg_id`, `timestamp` and `signatures` are the values of the `webhook-id`,
///   `webhook-timestamp` and `webhook-signature` headers;
/// - `body` is the raw request body, byte for byte;
/// - `secret` is the signing secret as returned by `PUT …/webhooks` (`whsec_…`; the prefix
///   may be left out);
/// - `tolerance` is how far the timestamp may lie from `now` in either direction
///   ([`DEFAULT_TOLERANCE`] is the usual choice), and `now` is the receiver's clock
///   (`SystemTime::now()`), passed in so the check itself stays pure.
///
/// Signatures are compared in constant time. Entries of other versions in the header are
/// skipped, so a receiver keeps working when new schemes are added beside `v1`.
///
/// # Errors
/// [`VerifyError`] saying which check failed.
///
/// # Example
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use mailroom_domain::webhook_signature::{verify, VerifyError, DEFAULT_TOLERANCE};
///
/// // What arrived (this is the reference example of the Standard Webhooks specification).
/// let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// let id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
/// let timestamp = "1614265330";
/// let signature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
/// let body = br#"{"test": 2432232314}"#;
///
/// let now = UNIX_EPOCH + Duration::from_secs(1614265330 + 12);
/// assert_eq!(verify(id, timestamp, body, signature, secret, DEFAULT_TOLERANCE, now), Ok(()));
///
/// // A changed body, or the same delivery replayed an hour later, is refused.
/// let tampered = br#"{"test": 2432232315}"#;
/// assert_eq!(
///     verify(id, timestamp, tampered, signature, secret, DEFAULT_TOLERANCE, now),
///     Err(VerifyError::NoMatchingSignature)
/// );
/// let later = now + Duration::from_secs(3600);
/// assert_eq!(
///     verify(id, timestamp, body, signature, secret, DEFAULT_TOLERANCE, later),
///     Err(VerifyError::TimestampTooOld)
/// );
/// ```
pub fn verify(
    msg_id: &str,
    timestamp: &str,
    body: &[u8],
    signatures: &str,
    secret: &str,
    tolerance: Duration,
    now: SystemTime,
) -> Result<(), VerifyError> {
    let encoded = secret.strip_prefix(SIGNING_SECRET_PREFIX).unwrap_or(secret);
    let key = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()
        .filter(|key| !key.is_empty())
        .ok_or(VerifyError::InvalidSecret)?;
    let sent_at: i64 = timestamp
        .trim()
        .parse()
        .map_err(|_| VerifyError::InvalidTimestamp)?;
    check_freshness(sent_at, tolerance, now)?;
    let mac = keyed_mac(&key, msg_id, timestamp.trim(), body);
    let matches = signatures
        .split_whitespace()
        .filter_map(|entry| entry.split_once(','))
        .filter(|(version, _)| *version == SIGNATURE_VERSION)
        .filter_map(|(_, encoded)| {
            base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .ok()
        })
        // `verify_slice` compares in constant time.
        .any(|candidate| mac.clone().verify_slice(&candidate).is_ok());
    if matches {
        Ok(())
    } else {
        Err(VerifyError::NoMatchingSignature)
    }
}

fn keyed_mac(key: &[u8], msg_id: &str, timestamp: &str, body: &[u8]) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC accepts keys of any length");
    mac.update(msg_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

fn check_freshness(sent_at: i64, tolerance: Duration, now: SystemTime) -> Result<(), VerifyError> {
    let now = match now.duration_since(UNIX_EPOCH) {
        Ok(since) => i128::from(since.as_secs()),
        Err(before) => -i128::from(before.duration().as_secs()),
    };
    let tolerance = i128::from(tolerance.as_secs());
    let sent_at = i128::from(sent_at);
    if sent_at < now - tolerance {
        Err(VerifyError::TimestampTooOld)
    } else if sent_at > now + tolerance {
        Err(VerifyError::TimestampTooNew)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TIMESTAMP: i64 = 1_614_265_330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    fn at(seconds: i64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(u64::try_from(seconds).expect("positive"))
    }

    #[test]
    fn signing_reproduces_the_reference_vector() {
        let secret = SigningSecret::parse(SECRET).expect("valid secret");
        assert_eq!(sign(&secret, ID, TIMESTAMP, BODY), SIGNATURE);
    }

    #[test]
    fn verification_accepts_what_signing_produces() {
        let secret = SigningSecret::from_random([7u8; 32]);
        let signature = sign(&secret, "evt_1", 1_700_000_000, b"{}");
        let expose = secret.secret().expose();
        let now = at(1_700_000_100);
        assert_eq!(
            verify(
                "evt_1",
                "1700000000",
                b"{}",
                &signature,
                expose,
                DEFAULT_TOLERANCE,
                now
            ),
            Ok(())
        );
        let bare = expose.trim_start_matches("whsec_");
        assert_eq!(
            verify(
                "evt_1",
                "1700000000",
                b"{}",
                &signature,
                bare,
                DEFAULT_TOLERANCE,
                now
            ),
            Ok(()),
            "the prefix is optional"
        );
    }

    #[test]
    fn any_matching_v1_entry_is_enough() {
        let now = at(TIMESTAMP);
        let ts = TIMESTAMP.to_string();
        let list = format!("v1,bm9wZQ== v1a,abc {SIGNATURE}");
        assert_eq!(
            verify(ID, &ts, BODY, &list, SECRET, DEFAULT_TOLERANCE, now),
            Ok(())
        );
        let wrong_version = SIGNATURE.replacen("v1,", "v2,", 1);
        assert_eq!(
            verify(
                ID,
                &ts,
                BODY,
                &wrong_version,
                SECRET,
                DEFAULT_TOLERANCE,
                now
            ),
            Err(VerifyError::NoMatchingSignature)
        );
        assert_eq!(
            verify(ID, &ts, BODY, "garbage", SECRET, DEFAULT_TOLERANCE, now),
            Err(VerifyError::NoMatchingSignature)
        );
    }

    #[test]
    fn every_signed_part_matters() {
        let now = at(TIMESTAMP);
        let ts = TIMESTAMP.to_string();
        let check = |id: &str, ts: &str, body: &[u8], secret: &str| {
            verify(id, ts, body, SIGNATURE, secret, DEFAULT_TOLERANCE, now)
        };
        assert_eq!(check(ID, &ts, BODY, SECRET), Ok(()));
        assert_eq!(
            check("msg_other", &ts, BODY, SECRET),
            Err(VerifyError::NoMatchingSignature)
        );
        assert_eq!(
            check(ID, "1614265331", BODY, SECRET),
            Err(VerifyError::NoMatchingSignature)
        );
        assert_eq!(
            check(ID, &ts, b"{\"test\":2432232314}", SECRET),
            Err(VerifyError::NoMatchingSignature)
        );
        let other = SigningSecret::from_random([1u8; 32]);
        assert_eq!(
            check(ID, &ts, BODY, other.secret().expose()),
            Err(VerifyError::NoMatchingSignature)
        );
    }

    #[test]
    fn timestamps_outside_the_tolerance_are_refused() {
        let ts = TIMESTAMP.to_string();
        let tolerance = Duration::from_secs(300);
        let check = |now: i64| verify(ID, &ts, BODY, SIGNATURE, SECRET, tolerance, at(now));
        assert_eq!(check(TIMESTAMP + 300), Ok(()));
        assert_eq!(check(TIMESTAMP - 300), Ok(()));
        assert_eq!(check(TIMESTAMP + 301), Err(VerifyError::TimestampTooOld));
        assert_eq!(check(TIMESTAMP - 301), Err(VerifyError::TimestampTooNew));
        assert_eq!(
            verify(
                ID,
                "soon",
                BODY,
                SIGNATURE,
                SECRET,
                tolerance,
                at(TIMESTAMP)
            ),
            Err(VerifyError::InvalidTimestamp)
        );
        assert_eq!(
            verify(
                ID,
                &ts,
                BODY,
                SIGNATURE,
                "whsec_!!",
                tolerance,
                at(TIMESTAMP)
            ),
            Err(VerifyError::InvalidSecret)
        );
    }
}
