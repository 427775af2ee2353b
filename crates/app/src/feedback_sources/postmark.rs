//! Postmark's bounce and spam complaint webhooks. Postmark signs nothing; the webhook URL
//! carries HTTP basic-auth credentials whose password is a secret Mailroom generated, and
//! only its SHA-256 is stored.

use base64::Engine as _;
use mailroom_domain::feedback::{plain_address, FeedbackKind, FeedbackReport};
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

/// The user name in the webhook URL's credentials (any is accepted; the password counts).
pub const USERNAME: &str = "mailroom";

/// Postmark bounce types that mean the address will never accept mail.
pub const PERMANENT_TYPES: [&str; 2] = ["HardBounce", "BadEmailAddress"];

/// SHA-256 of a secret, as stored.
pub fn secret_hash(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// Whether the `Authorization` header carries basic credentials whose password hashes to
/// `stored` (compared in constant time).
pub fn authorized(authorization: Option<&str>, stored: &[u8; 32]) -> bool {
    let Some(encoded) = authorization.map(str::trim).and_then(|value| {
        value
            .strip_prefix("Basic ")
            .or_else(|| value.strip_prefix("basic "))
    }) else {
        return false;
    };
    let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded.trim()) else {
        return false;
    };
    let Ok(text) = String::from_utf8(decoded) else {
        return false;
    };
    let Some((_, password)) = text.split_once(':') else {
        return false;
    };
    bool::from(secret_hash(password).ct_eq(stored))
}

/// The webhook's report: a `Bounce` of a permanent type ([`PERMANENT_TYPES`]) is a
/// bounce, of another type (soft bounces, transient, auto-responders) ignored; a
/// `SpamComplaint` is a complaint; other record types are ignored.
///
/// # Errors
/// When the body is not a Postmark webhook payload.
pub fn report(body: &[u8]) -> Result<FeedbackReport, String> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| format!("not a Postmark webhook payload: {error}"))?;
    let record_type = value["RecordType"]
        .as_str()
        .ok_or("the payload names no RecordType")?;
    let kind = match record_type {
        "Bounce" => {
            let bounce_type = value["Type"].as_str().unwrap_or("");
            if PERMANENT_TYPES.contains(&bounce_type) {
                let diagnostic = ["Details", "Description"]
                    .iter()
                    .filter_map(|field| value[*field].as_str())
                    .map(str::trim)
                    .find(|text| !text.is_empty())
                    .unwrap_or(bounce_type)
                    .to_owned();
                FeedbackKind::Bounce { diagnostic }
            } else {
                FeedbackKind::Ignored {
                    reason: format!("a Postmark bounce of type {bounce_type:?}"),
                }
            }
        }
        "SpamComplaint" => FeedbackKind::Complaint,
        other => FeedbackKind::Ignored {
            reason: format!("a Postmark {other} event"),
        },
    };
    Ok(FeedbackReport {
        kind,
        // `MessageID` is Postmark's own id, not the message's header.
        original_message_id: None,
        recipient: value["Email"].as_str().and_then(plain_address),
        original_to: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_generated_password_authorizes() {
        let stored = secret_hash("s3cret-value");
        let header = |user_pass: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(user_pass)
            )
        };
        assert!(authorized(Some(&header("mailroom:s3cret-value")), &stored));
        assert!(!authorized(Some(&header("mailroom:s3cret-valuf")), &stored));
        assert!(!authorized(Some(&header("s3cret-value")), &stored));
        assert!(!authorized(Some("Bearer s3cret-value"), &stored));
        assert!(!authorized(None, &stored));
    }

    #[test]
    fn hard_bounces_and_spam_complaints_count_soft_bounces_do_not() {
        let hard = br#"{"RecordType":"Bounce","MessageStream":"outbound","ID":4323372036854775807,"Type":"HardBounce","TypeCode":1,"Name":"Hard bounce","Tag":"Test","MessageID":"883953f4-6105-42a2-a16a-77a8eac79483","ServerID":23,"Description":"The server was unable to deliver your message (ex: unknown user, mailbox not found).","Details":"Test bounce details","Email":"john@example.com","From":"sender@example.com","BouncedAt":"2019-11-05T16:33:54.9070259Z","Inactive":true,"CanActivate":true,"Subject":"Test subject"}"#;
        let report = report(hard).unwrap();
        assert_eq!(
            report.kind,
            FeedbackKind::Bounce {
                diagnostic: "Test bounce details".into()
            }
        );
        assert_eq!(report.recipient.unwrap().as_str(), "john@example.com");
        let soft = String::from_utf8_lossy(hard).replace("HardBounce", "SoftBounce");
        assert!(matches!(
            super::report(soft.as_bytes()).unwrap().kind,
            FeedbackKind::Ignored { .. }
        ));
        let spam = br#"{"RecordType":"SpamComplaint","MessageStream":"outbound","ID":42,"Type":"SpamComplaint","TypeCode":512,"Name":"Spam complaint","Email":"john@example.com"}"#;
        assert_eq!(super::report(spam).unwrap().kind, FeedbackKind::Complaint);
        assert!(super::report(b"[]").is_err());
    }
}
