//! Mailgun's event webhooks: `signature.signature` is HMAC-SHA256 under the webhook
//! signing key of `timestamp` followed by `token`; `event-data` is the event.

use hmac::{Hmac, Mac as _};
use mailroom_domain::feedback::{message_id, plain_address, FeedbackKind, FeedbackReport};
use serde_json::Value;
use sha2::Sha256;

/// How far a request's timestamp may be from now, in seconds, before it is refused as
/// stale (Mailgun's own advice for replay protection).
pub const MAX_SKEW_SECS: i64 = 300;

/// The longest token accepted (Mailgun's are 50 characters).
pub const MAX_TOKEN_CHARS: usize = 256;

/// A Mailgun webhook request, read but not yet verified.
#[derive(Debug, Clone)]
pub struct MailgunRequest {
    /// Unix seconds, as sent.
    pub timestamp: String,
    /// The random token; a repeat is a replay.
    pub token: String,
    /// Hex HMAC-SHA256.
    pub signature: String,
    /// `event-data`.
    pub event: Value,
}

/// Why a request is refused before its event is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The signature does not verify.
    BadSignature,
    /// The timestamp is more than [`MAX_SKEW_SECS`] from now.
    Stale,
}

impl MailgunRequest {
    /// Reads the body's `signature` and `event-data`.
    ///
    /// # Errors
    /// When the body is not a Mailgun webhook request.
    pub fn parse(body: &[u8]) -> Result<Self, String> {
        let mut value: Value = serde_json::from_slice(body)
            .map_err(|error| format!("not a Mailgun webhook request: {error}"))?;
        let signature = &value["signature"];
        let field = |name: &str| {
            signature[name]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("the request has no signature.{name}"))
        };
        let (timestamp, token, signed) =
            (field("timestamp")?, field("token")?, field("signature")?);
        if token.is_empty() || token.len() > MAX_TOKEN_CHARS {
            return Err("the signature token has no acceptable length".into());
        }
        Ok(Self {
            timestamp,
            token,
            signature: signed,
            event: value["event-data"].take(),
        })
    }

    /// Checks the signature under `key` and the timestamp against `now` (Unix seconds).
    ///
    /// # Errors
    /// See [`Refusal`].
    pub fn verify(&self, key: &[u8], now: i64) -> Result<(), Refusal> {
        let expected = hex::decode(self.signature.trim()).map_err(|_| Refusal::BadSignature)?;
        let mut mac = Hmac::<Sha256>::new_from_slice(key).map_err(|_| Refusal::BadSignature)?;
        mac.update(self.timestamp.as_bytes());
        mac.update(self.token.as_bytes());
        // Constant-time comparison.
        mac.verify_slice(&expected)
            .map_err(|_| Refusal::BadSignature)?;
        let at: i64 = self.timestamp.trim().parse().map_err(|_| Refusal::Stale)?;
        if (now - at).abs() > MAX_SKEW_SECS {
            return Err(Refusal::Stale);
        }
        Ok(())
    }

    /// The event's report: `failed` with severity `permanent` is a bounce, `temporary`
    /// is ignored; `complained` is a complaint; any other event is ignored.
    ///
    /// # Errors
    /// When `event-data` names no event.
    pub fn report(&self) -> Result<FeedbackReport, String> {
        let event = self.event["event"]
            .as_str()
            .ok_or("the request's event-data names no event")?;
        let recipient = self.event["recipient"].as_str().and_then(plain_address);
        let original_message_id = self.event["message"]["headers"]["message-id"]
            .as_str()
            .and_then(message_id);
        let kind = match event {
            "failed" => match self.event["severity"].as_str() {
                Some("permanent") => {
                    let status = &self.event["delivery-status"];
                    let diagnostic = ["message", "description"]
                        .iter()
                        .filter_map(|name| status[*name].as_str())
                        .map(str::trim)
                        .find(|text| !text.is_empty())
                        .map(str::to_owned)
                        .or_else(|| status["code"].as_i64().map(|code| code.to_string()))
                        .unwrap_or_else(|| "Mailgun permanent failure".into());
                    FeedbackKind::Bounce { diagnostic }
                }
                severity => FeedbackKind::Ignored {
                    reason: format!(
                        "a Mailgun failure of severity {}",
                        severity.unwrap_or("(none)")
                    ),
                },
            },
            "complained" => FeedbackKind::Complaint,
            other => FeedbackKind::Ignored {
                reason: format!("a Mailgun {other} event"),
            },
        };
        Ok(FeedbackReport {
            kind,
            original_message_id,
            recipient,
            original_to: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mailgun's documented example signature.
    const KEY: &str = "key-this-is-not-a-real-key";

    fn signed(timestamp: &str, token: &str, event: &str) -> Vec<u8> {
        let mut mac = Hmac::<Sha256>::new_from_slice(KEY.as_bytes()).unwrap();
        mac.update(timestamp.as_bytes());
        mac.update(token.as_bytes());
        let signature = hex::encode(mac.finalize().into_bytes());
        format!(
            r#"{{"signature":{{"timestamp":"{timestamp}","token":"{token}","signature":"{signature}"}},"event-data":{event}}}"#
        )
        .into_bytes()
    }

    const FAILED: &str = r#"{"event":"failed","severity":"permanent","reason":"bounce","recipient":"alice@example.com","message":{"headers":{"message-id":"20130503182626.18666.16540@sandbox.mailgun.org"}},"delivery-status":{"code":550,"message":"","description":"No such mailbox"}}"#;

    #[test]
    fn a_signed_fresh_request_verifies_and_a_stale_or_forged_one_does_not() {
        let request = MailgunRequest::parse(&signed(
            "1529006854",
            "a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0",
            FAILED,
        ))
        .unwrap();
        assert_eq!(request.verify(KEY.as_bytes(), 1_529_006_900), Ok(()));
        assert_eq!(
            request.verify(KEY.as_bytes(), 1_529_006_854 + 301),
            Err(Refusal::Stale)
        );
        assert_eq!(
            request.verify(b"another key", 1_529_006_900),
            Err(Refusal::BadSignature)
        );
        let mut tampered = request.clone();
        tampered.timestamp = "1529006855".into();
        assert_eq!(
            tampered.verify(KEY.as_bytes(), 1_529_006_900),
            Err(Refusal::BadSignature)
        );
    }

    #[test]
    fn permanent_failures_bounce_temporary_ones_are_ignored_complaints_complain() {
        let report = MailgunRequest::parse(&signed("1", "t", FAILED))
            .unwrap()
            .report()
            .unwrap();
        assert_eq!(
            report.kind,
            FeedbackKind::Bounce {
                diagnostic: "No such mailbox".into()
            }
        );
        assert_eq!(
            report.original_message_id.as_deref(),
            Some("<20130503182626.18666.16540@sandbox.mailgun.org>")
        );
        assert_eq!(report.recipient.unwrap().as_str(), "alice@example.com");
        let temporary = FAILED.replace("permanent", "temporary");
        let report = MailgunRequest::parse(&signed("1", "t", &temporary))
            .unwrap()
            .report()
            .unwrap();
        assert!(matches!(report.kind, FeedbackKind::Ignored { .. }));
        let complained = r#"{"event":"complained","recipient":"bob@example.com"}"#;
        let report = MailgunRequest::parse(&signed("1", "t", complained))
            .unwrap()
            .report()
            .unwrap();
        assert_eq!(report.kind, FeedbackKind::Complaint);
        assert!(MailgunRequest::parse(b"{}").is_err());
        assert!(MailgunRequest::parse(b"junk").is_err());
    }
}
