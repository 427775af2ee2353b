//! Amazon SES through SNS: the SNS message envelope, its signature (SignatureVersion 1,
//! SHA1withRSA, or 2, SHA256withRSA, over the documented canonical string), and the SES
//! bounce and complaint notifications inside it. Pure: the certificate is fetched by the
//! caller.

use base64::Engine as _;
use mailroom_domain::feedback::{
    diagnostic_text, message_id, plain_address, FeedbackKind, FeedbackReport,
};
use rsa::{pkcs8::DecodePublicKey as _, Pkcs1v15Sign, RsaPublicKey};
use serde::Deserialize;
use serde_json::Value;
use sha1::Sha1;
use sha2::{Digest as _, Sha256};

/// The most recipients of one SES event read (SES itself sends at most 50).
pub const MAX_RECIPIENTS: usize = 100;

/// How old an SNS message's `Timestamp` (its publication) may be: SNS keeps retrying a
/// delivery for a while with the same timestamp, so this is longer than the 5 minutes of
/// Mailgun and SendGrid, whose requests are signed when sent.
pub const MAX_AGE_SECS: i64 = 60 * 60;

/// How far in the future an SNS message's `Timestamp` may be (clocks differ).
pub const MAX_AHEAD_SECS: i64 = 300;

/// An SNS message as posted to an HTTPS subscription.
#[derive(Debug, Clone, Deserialize)]
pub struct SnsMessage {
    /// `Notification`, `SubscriptionConfirmation` or `UnsubscribeConfirmation`.
    #[serde(rename = "Type")]
    pub kind: String,
    /// SNS's id of the message.
    #[serde(rename = "MessageId")]
    pub message_id: String,
    /// The confirmation token (confirmations only).
    #[serde(rename = "Token")]
    pub token: Option<String>,
    /// The topic it was published to.
    #[serde(rename = "TopicArn")]
    pub topic_arn: String,
    /// The subject (notifications, when the publisher set one).
    #[serde(rename = "Subject")]
    pub subject: Option<String>,
    /// The payload: for SES, the event as JSON text.
    #[serde(rename = "Message")]
    pub message: String,
    /// When SNS published it.
    #[serde(rename = "Timestamp")]
    pub timestamp: String,
    /// `1` (SHA1withRSA) or `2` (SHA256withRSA).
    #[serde(rename = "SignatureVersion")]
    pub signature_version: String,
    /// Base64 signature of [`SnsMessage::string_to_sign`].
    #[serde(rename = "Signature")]
    pub signature: String,
    /// Where the signing certificate is.
    #[serde(rename = "SigningCertURL")]
    pub signing_cert_url: String,
    /// The URL that confirms a subscription (confirmations only).
    #[serde(rename = "SubscribeURL")]
    pub subscribe_url: Option<String>,
}

/// Why a message does not verify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadSignature(pub &'static str);

impl SnsMessage {
    /// Whether its `Timestamp` is within [`MAX_AGE_SECS`] before and [`MAX_AHEAD_SECS`]
    /// after `now`; a timestamp that does not parse is not.
    pub fn fresh(&self, now: mailroom_domain::Timestamp) -> bool {
        mailroom_domain::Timestamp::parse(&self.timestamp).is_ok_and(|at| {
            let ahead_millis = at.unix_millis() - now.unix_millis();
            ahead_millis <= i128::from(MAX_AHEAD_SECS) * 1000
                && -ahead_millis <= i128::from(MAX_AGE_SECS) * 1000
        })
    }

    /// Reads the envelope.
    ///
    /// # Errors
    /// The parser's message when the body is not an SNS message.
    pub fn parse(body: &[u8]) -> Result<Self, String> {
        serde_json::from_slice(body).map_err(|error| format!("not an SNS message: {error}"))
    }

    /// The canonical string SNS signs: `Name\nvalue\n` for the documented fields of the
    /// message's type, in byte order of their names, leaving out an absent `Subject`.
    pub fn string_to_sign(&self) -> Result<String, BadSignature> {
        let mut fields: Vec<(&str, &str)> = vec![("Message", &self.message)];
        fields.push(("MessageId", &self.message_id));
        match self.kind.as_str() {
            "Notification" => {
                if let Some(subject) = &self.subject {
                    fields.push(("Subject", subject));
                }
            }
            "SubscriptionConfirmation" | "UnsubscribeConfirmation" => {
                let url = self
                    .subscribe_url
                    .as_deref()
                    .ok_or(BadSignature("no SubscribeURL"))?;
                fields.push(("SubscribeURL", url));
            }
            _ => return Err(BadSignature("unknown message type")),
        }
        fields.push(("Timestamp", &self.timestamp));
        if self.kind != "Notification" {
            let token = self.token.as_deref().ok_or(BadSignature("no Token"))?;
            fields.push(("Token", token));
        }
        fields.push(("TopicArn", &self.topic_arn));
        fields.push(("Type", &self.kind));
        Ok(fields
            .into_iter()
            .map(|(name, value)| format!("{name}\n{value}\n"))
            .collect())
    }

    /// Checks the signature with the certificate's key.
    ///
    /// # Errors
    /// [`BadSignature`] when it does not verify.
    pub fn verify(&self, key: &RsaPublicKey) -> Result<(), BadSignature> {
        let text = self.string_to_sign()?;
        let signature = base64::engine::general_purpose::STANDARD
            .decode(self.signature.trim())
            .map_err(|_| BadSignature("the signature is not base64"))?;
        let checked = match self.signature_version.as_str() {
            "1" => key.verify(
                Pkcs1v15Sign::new::<Sha1>(),
                &Sha1::digest(text.as_bytes()),
                &signature,
            ),
            "2" => key.verify(
                Pkcs1v15Sign::new::<Sha256>(),
                &Sha256::digest(text.as_bytes()),
                &signature,
            ),
            _ => return Err(BadSignature("unknown SignatureVersion")),
        };
        checked.map_err(|_| BadSignature("the signature does not verify"))
    }
}

/// The RSA key of a PEM certificate (the SNS signing certificate).
///
/// # Errors
/// When the text is not a PEM X.509 certificate with an RSA key.
pub fn certificate_key(pem: &[u8]) -> Result<RsaPublicKey, String> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem)
        .map_err(|error| format!("not a PEM certificate: {error}"))?;
    let certificate = pem
        .parse_x509()
        .map_err(|error| format!("not an X.509 certificate: {error}"))?;
    RsaPublicKey::from_public_key_der(certificate.public_key().raw)
        .map_err(|error| format!("not an RSA key: {error}"))
}

/// The reports of an SES event (the `Message` of a notification): one per bounced or
/// complaining recipient. A `Permanent` bounce is a bounce, a `Transient` or
/// `Undetermined` one is ignored; a complaint is a complaint unless its feedback type says
/// `not-spam`; other events (deliveries, sends, opens) are one ignored report.
///
/// # Errors
/// When the message is not an SES event.
pub fn reports(message: &str) -> Result<Vec<FeedbackReport>, String> {
    let event: Value = serde_json::from_str(message)
        .map_err(|error| format!("the SNS message is not an SES event: {error}"))?;
    let kind = event
        .get("notificationType")
        .or_else(|| event.get("eventType"))
        .and_then(Value::as_str)
        .ok_or("the SES event names no notificationType or eventType")?;
    let original = original_message_id(&event["mail"]);
    let recipients = |list: &Value| -> Result<Vec<Option<_>>, String> {
        let list = list
            .as_array()
            .ok_or_else(|| format!("the SES {kind} event lists no recipients"))?;
        Ok(list
            .iter()
            .take(MAX_RECIPIENTS)
            .map(|recipient| recipient["emailAddress"].as_str().and_then(plain_address))
            .collect())
    };
    let report = |kind, recipient| FeedbackReport {
        kind,
        original_message_id: original.clone(),
        recipient,
        original_to: None,
    };
    match kind {
        "Bounce" => {
            let bounce = &event["bounce"];
            let bounce_type = bounce["bounceType"].as_str().unwrap_or("");
            let list = &bounce["bouncedRecipients"];
            let addresses = recipients(list)?;
            Ok(addresses
                .into_iter()
                .zip(list.as_array().into_iter().flatten())
                .map(|(address, detail)| {
                    let kind = if bounce_type == "Permanent" {
                        FeedbackKind::Bounce {
                            diagnostic: bounce_diagnostic(bounce, detail),
                        }
                    } else {
                        FeedbackKind::Ignored {
                            reason: format!("an SES bounce of type {bounce_type:?}"),
                        }
                    };
                    report(kind, address)
                })
                .collect())
        }
        "Complaint" => {
            let complaint = &event["complaint"];
            let feedback_type = complaint["complaintFeedbackType"].as_str();
            let kind = if feedback_type == Some("not-spam") {
                FeedbackKind::Ignored {
                    reason: "an SES complaint of feedback type not-spam".into(),
                }
            } else {
                FeedbackKind::Complaint
            };
            Ok(recipients(&complaint["complainedRecipients"])?
                .into_iter()
                .map(|address| report(kind.clone(), address))
                .collect())
        }
        other => Ok(vec![report(
            FeedbackKind::Ignored {
                reason: format!("an SES {other} event"),
            },
            None,
        )]),
    }
}

/// What the receiving server said about one recipient: its diagnostic code, else its
/// status, else the bounce's type and subtype.
fn bounce_diagnostic(bounce: &Value, recipient: &Value) -> String {
    recipient["diagnosticCode"]
        .as_str()
        .and_then(diagnostic_text)
        .or_else(|| recipient["status"].as_str().map(str::to_owned))
        .unwrap_or_else(|| {
            format!(
                "SES {} bounce ({})",
                bounce["bounceType"].as_str().unwrap_or("Permanent"),
                bounce["bounceSubType"].as_str().unwrap_or("General")
            )
        })
}

/// The original `Message-ID` header: `mail.commonHeaders.messageId`, else the
/// `Message-ID` among `mail.headers`. (`mail.messageId` is SES's own id, not the header.)
fn original_message_id(mail: &Value) -> Option<String> {
    if let Some(id) = mail["commonHeaders"]["messageId"].as_str() {
        return message_id(id);
    }
    mail["headers"]
        .as_array()?
        .iter()
        .find(|header| {
            header["name"]
                .as_str()
                .is_some_and(|name| name.eq_ignore_ascii_case("message-id"))
        })
        .and_then(|header| header["value"].as_str())
        .and_then(message_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(kind: &str) -> SnsMessage {
        SnsMessage {
            kind: kind.into(),
            message_id: "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324".into(),
            token: Some("2336412f37fb687f5d51e6e241d09c805a5a57b30d712f794cc5f6a988666d92768dd60a747ba6f3beb71854e285d6ad02428b09ceece29417f1f02d609c582afbacc99c583a916b9981dd2728f4ae6fdb82efd087cc3b7849e05798d2d2785c03b0879594eeac82c01f235d0e717736".into()),
            topic_arn: "arn:aws:sns:us-west-2:123456789012:MyTopic".into(),
            subject: Some("My First Message".into()),
            message: "Hello world!".into(),
            timestamp: "2012-05-02T00:54:06.655Z".into(),
            signature_version: "1".into(),
            signature: String::new(),
            signing_cert_url: "https://sns.us-west-2.amazonaws.com/SimpleNotificationService-f3ecfb7224c7233fe7bb5f59f96de52f.pem".into(),
            subscribe_url: Some("https://sns.us-west-2.amazonaws.com/?Action=ConfirmSubscription&TopicArn=arn:aws:sns:us-west-2:123456789012:MyTopic&Token=2336".into()),
        }
    }

    #[test]
    fn the_canonical_string_holds_the_documented_fields_of_each_type() {
        let notification = envelope("Notification").string_to_sign().unwrap();
        assert_eq!(
            notification,
            "Message\nHello world!\nMessageId\n22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324\n\
             Subject\nMy First Message\nTimestamp\n2012-05-02T00:54:06.655Z\n\
             TopicArn\narn:aws:sns:us-west-2:123456789012:MyTopic\nType\nNotification\n"
        );
        let mut without_subject = envelope("Notification");
        without_subject.subject = None;
        assert!(!without_subject
            .string_to_sign()
            .unwrap()
            .contains("Subject"));
        let confirmation = envelope("SubscriptionConfirmation")
            .string_to_sign()
            .unwrap();
        assert!(confirmation.starts_with("Message\nHello world!\nMessageId\n"));
        assert!(confirmation.contains("\nSubscribeURL\nhttps://sns.us-west-2"));
        assert!(confirmation.contains("\nToken\n2336412f"));
        assert!(!confirmation.contains("Subject"));
        assert_eq!(
            envelope("Other").string_to_sign(),
            Err(BadSignature("unknown message type"))
        );
    }

    const BOUNCE: &str = r#"{"notificationType":"Bounce","bounce":{"bounceType":"Permanent","bounceSubType":"General","bouncedRecipients":[{"emailAddress":"jane@example.com","status":"5.1.1","action":"failed","diagnosticCode":"smtp; 550 5.1.1 user unknown"},{"emailAddress":"richard@example.com"}],"timestamp":"2016-01-27T14:59:38.237Z","feedbackId":"00000138111222aa-33322211-cccc-cccc-cccc-ddddaaaa0680-000000"},"mail":{"timestamp":"2016-01-27T14:59:38.237Z","source":"john@example.com","messageId":"00000138111222aa-33322211-cccc-cccc-cccc-ddddaaaa0680-000000","destination":["jane@example.com","mary@example.com","richard@example.com"],"headers":[{"name":"Message-ID","value":"<0193abc@acme.example>"}]}}"#;

    #[test]
    fn a_permanent_bounce_reports_each_recipient_with_its_diagnostic() {
        let reports = reports(BOUNCE).unwrap();
        assert_eq!(reports.len(), 2);
        assert_eq!(
            reports[0].kind,
            FeedbackKind::Bounce {
                diagnostic: "550 5.1.1 user unknown".into()
            }
        );
        assert_eq!(
            reports[0].original_message_id.as_deref(),
            Some("<0193abc@acme.example>")
        );
        assert_eq!(
            reports[0].recipient.as_ref().unwrap().as_str(),
            "jane@example.com"
        );
        assert_eq!(
            reports[1].kind,
            FeedbackKind::Bounce {
                diagnostic: "SES Permanent bounce (General)".into()
            }
        );
        let transient = BOUNCE.replace("\"Permanent\"", "\"Transient\"");
        assert!(reports_of(&transient)
            .iter()
            .all(|kind| matches!(kind, FeedbackKind::Ignored { .. })));
    }

    fn reports_of(message: &str) -> Vec<FeedbackKind> {
        reports(message)
            .unwrap()
            .into_iter()
            .map(|report| report.kind)
            .collect()
    }

    #[test]
    fn complaints_deliveries_and_junk_are_told_apart() {
        let complaint = r#"{"notificationType":"Complaint","complaint":{"userAgent":"AnyCompany Feedback Loop (V0.01)","complainedRecipients":[{"emailAddress":"richard@example.com"}],"complaintFeedbackType":"abuse","arrivalDate":"2016-01-27T14:59:38.237Z","timestamp":"2016-01-27T14:59:38.237Z","feedbackId":"000001378603177f-18c07c78-fa81-4a58-9dd1-fedc3cb8f49a-000000"},"mail":{"commonHeaders":{"messageId":"<c@acme.example>"}}}"#;
        assert_eq!(reports_of(complaint), vec![FeedbackKind::Complaint]);
        assert_eq!(
            reports(complaint).unwrap()[0]
                .original_message_id
                .as_deref(),
            Some("<c@acme.example>")
        );
        let not_spam = complaint.replace("\"abuse\"", "\"not-spam\"");
        assert!(matches!(
            reports_of(&not_spam)[0],
            FeedbackKind::Ignored { .. }
        ));
        let delivery = r#"{"eventType":"Delivery","mail":{},"delivery":{}}"#;
        assert!(matches!(
            reports_of(delivery)[0],
            FeedbackKind::Ignored { .. }
        ));
        assert!(reports("Hello world!").is_err());
        assert!(reports(r#"{"notificationType":"Bounce","bounce":{}}"#).is_err());
    }
}
