//! SendGrid's signed event webhook: an ECDSA P-256 signature (base64 DER, header
//! `X-Twilio-Email-Event-Webhook-Signature`) over the timestamp header followed by the
//! raw body, checked with the verification key SendGrid shows (base64 DER
//! SubjectPublicKeyInfo). The body is a batch: a JSON array of events.

use base64::Engine as _;
use mailroom_domain::feedback::{message_id, plain_address, FeedbackKind, FeedbackReport};
use p256::{
    ecdsa::{signature::Verifier as _, Signature, VerifyingKey},
    pkcs8::DecodePublicKey as _,
};
use serde_json::Value;

/// The signature header.
pub const SIGNATURE_HEADER: &str = "x-twilio-email-event-webhook-signature";
/// The timestamp header.
pub const TIMESTAMP_HEADER: &str = "x-twilio-email-event-webhook-timestamp";

/// How far the signed timestamp (Unix seconds) may be from now, in seconds, either way:
/// a signed request replayed later than this is refused (as Mailgun's are).
pub const MAX_SKEW_SECS: i64 = 300;

/// Whether the signed timestamp header is within [`MAX_SKEW_SECS`] of `now_unix`.
pub fn fresh(timestamp: &str, now_unix: i64) -> bool {
    timestamp
        .trim()
        .parse::<i64>()
        .is_ok_and(|at| (now_unix - at).abs() <= MAX_SKEW_SECS)
}

/// The verification key, from its base64 DER text.
///
/// # Errors
/// When the text is not a base64 P-256 public key.
pub fn verifying_key(text: &str) -> Result<VerifyingKey, String> {
    let der = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|_| "the public key is not base64".to_owned())?;
    VerifyingKey::from_public_key_der(&der)
        .map_err(|_| "the public key is not a DER P-256 public key".to_owned())
}

/// Whether `signature` (base64 DER) signs `timestamp` followed by `body` under `key`.
pub fn verify(key: &VerifyingKey, signature: &str, timestamp: &str, body: &[u8]) -> bool {
    let Ok(der) = base64::engine::general_purpose::STANDARD.decode(signature.trim()) else {
        return false;
    };
    let Ok(signature) = Signature::from_der(&der) else {
        return false;
    };
    let mut signed = Vec::with_capacity(timestamp.len() + body.len());
    signed.extend_from_slice(timestamp.as_bytes());
    signed.extend_from_slice(body);
    key.verify(&signed, &signature).is_ok()
}

/// The most bounce and spam-report events one batch may hold (400 beyond).
pub const MAX_RECORDABLE_EVENTS: usize = 1_000;

/// One report per event of the batch: `bounce` of type `bounce` is a bounce (a `blocked`
/// bounce is SendGrid's temporary kind and is ignored), `spamreport` a complaint, any
/// other event (`dropped`, `deferred`, `delivered`, …) ignored.
///
/// # Errors
/// When the body is not a JSON array of events, or holds more than
/// [`MAX_RECORDABLE_EVENTS`] bounces and complaints.
pub fn reports(body: &[u8]) -> Result<Vec<FeedbackReport>, String> {
    let events: Vec<Value> = serde_json::from_slice(body)
        .map_err(|error| format!("not a SendGrid event batch: {error}"))?;
    // Each bounce or complaint is a transaction of its own, and the tenant holds the key
    // that signs the batch: a bound on them bounds what one request costs the database
    // every tenant shares. Other events cost nothing and are not counted.
    let recordable = events
        .iter()
        .filter(|event| matches!(event["event"].as_str(), Some("bounce" | "spamreport")))
        .count();
    if recordable > MAX_RECORDABLE_EVENTS {
        return Err(format!(
            "the batch holds {recordable} bounce and spam-report events, over the limit of \
             {MAX_RECORDABLE_EVENTS} per request"
        ));
    }
    events
        .iter()
        .map(|event| {
            let name = event["event"]
                .as_str()
                .ok_or("a SendGrid event names no event")?;
            let kind = match name {
                "bounce" => match event["type"].as_str() {
                    Some("blocked") => FeedbackKind::Ignored {
                        reason: "a SendGrid blocked bounce (temporary)".into(),
                    },
                    _ => FeedbackKind::Bounce {
                        diagnostic: ["reason", "status"]
                            .iter()
                            .filter_map(|field| event[*field].as_str())
                            .map(str::trim)
                            .find(|text| !text.is_empty())
                            .unwrap_or("SendGrid bounce")
                            .to_owned(),
                    },
                },
                "spamreport" => FeedbackKind::Complaint,
                other => FeedbackKind::Ignored {
                    reason: format!("a SendGrid {other} event"),
                },
            };
            Ok(FeedbackReport {
                kind,
                original_message_id: event["smtp-id"].as_str().and_then(message_id),
                recipient: event["email"].as_str().and_then(plain_address),
                original_to: None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_over_the_limit_of_bounces_and_complaints_is_refused() {
        let event = |name: &str| serde_json::json!({"event": name, "email": "a@example.com"});
        let batch = |bounces: usize, delivered: usize| {
            let events: Vec<Value> = std::iter::repeat_with(|| event("bounce"))
                .take(bounces)
                .chain(std::iter::repeat_with(|| event("delivered")).take(delivered))
                .collect();
            serde_json::to_vec(&events).expect("json")
        };
        assert!(reports(&batch(MAX_RECORDABLE_EVENTS, 5_000)).is_ok());
        let refused = reports(&batch(MAX_RECORDABLE_EVENTS + 1, 0)).expect_err("over");
        assert!(refused.contains("over the limit"), "{refused}");
    }
    use p256::{
        ecdsa::{signature::Signer as _, SigningKey},
        pkcs8::EncodePublicKey as _,
    };

    #[test]
    fn a_signature_over_timestamp_and_body_verifies_with_the_shown_key_only() {
        let signing = SigningKey::from_slice(&[7; 32]).unwrap();
        let shown = base64::engine::general_purpose::STANDARD.encode(
            signing
                .verifying_key()
                .to_public_key_der()
                .unwrap()
                .as_bytes(),
        );
        let key = verifying_key(&shown).unwrap();
        let body = br#"[{"email":"a@example.com","event":"spamreport"}]"#;
        let signature: Signature = signing.sign(&[b"1600112502".as_slice(), body].concat());
        let signature =
            base64::engine::general_purpose::STANDARD.encode(signature.to_der().as_bytes());
        assert!(verify(&key, &signature, "1600112502", body));
        assert!(!verify(&key, &signature, "1600112503", body));
        assert!(!verify(&key, &signature, "1600112502", b"[]"));
        assert!(!verify(&key, "junk", "1600112502", body));
        assert!(verifying_key("bm90IGEga2V5").is_err());
    }

    #[test]
    fn bounces_spam_reports_and_the_rest() {
        let body = br#"[
          {"email":"example@test.com","timestamp":1513299569,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","event":"bounce","category":"cat facts","sg_event_id":"6g4ZI7SA-xmRDv57GoPIPw==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0","reason":"500 unknown recipient","status":"5.0.0","type":"bounce"},
          {"email":"example@test.com","event":"bounce","type":"blocked","reason":"421 try later","status":"4.0.0"},
          {"email":"example@test.com","timestamp":1513299569,"event":"spamreport"},
          {"email":"example@test.com","event":"deferred","response":"400 try again later"},
          {"email":"example@test.com","event":"dropped","reason":"Bounced Address"}
        ]"#;
        let kinds: Vec<_> = reports(body).unwrap().into_iter().map(|r| r.kind).collect();
        assert_eq!(
            kinds[0],
            FeedbackKind::Bounce {
                diagnostic: "500 unknown recipient".into()
            }
        );
        assert!(matches!(kinds[1], FeedbackKind::Ignored { .. }));
        assert_eq!(kinds[2], FeedbackKind::Complaint);
        assert!(matches!(kinds[3], FeedbackKind::Ignored { .. }));
        assert!(matches!(kinds[4], FeedbackKind::Ignored { .. }));
        let first = &reports(body).unwrap()[0];
        assert_eq!(
            first.original_message_id.as_deref(),
            Some("<14c5d75ce93.dfd.64b469@ismtpd-555>")
        );
        assert!(reports(b"{}").is_err());
        assert!(reports(br#"[{"email":"a@b.example"}]"#).is_err());
    }
}
