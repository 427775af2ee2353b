//! A provider's request for a source: authenticated for that source alone, then each of
//! its events recorded through [`crate::feedback::record_report`].

use mailroom_domain::{
    feedback::{FeedbackKind, FeedbackReport},
    feedback_source::Provider,
    AccountId, FeedbackSourceId,
};

use super::{
    mailgun::{self, MailgunRequest},
    postmark, sendgrid,
    ses::{self, SnsMessage},
    signing_key_slot,
    sns::{allowed_url, SnsUrl, MAX_SNS_ANSWER_BYTES},
};
use crate::{
    feedback::record_report,
    ports::{in_transaction, FeedbackSourceRecord},
    AppError, Services,
};

/// The request headers a provider's authentication may read; the HTTP layer hands over
/// these (lower-cased) and no others.
pub const READ_HEADERS: [&str; 3] = [
    "authorization",
    sendgrid::SIGNATURE_HEADER,
    sendgrid::TIMESTAMP_HEADER,
];

/// A provider's request as received: the raw body (bounded by the API's body limit) and
/// the headers of [`READ_HEADERS`].
#[derive(Debug, Clone, Default)]
pub struct ProviderRequest {
    /// The body, as received (signatures cover the raw bytes).
    pub body: Vec<u8>,
    /// `(lower-case name, value)`.
    pub headers: Vec<(String, String)>,
}

impl ProviderRequest {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(known, _)| known == name)
            .map(|(_, value)| value.as_str())
    }
}

/// What a request did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiveOutcome {
    /// Events in the request.
    pub received: usize,
    /// Events that changed a contact or message.
    pub recorded: usize,
    /// Events that changed nothing: temporary failures, other event types, repeats, and
    /// recipients the account does not know (accepted so the provider does not retry
    /// them for days).
    pub ignored: usize,
    /// Whether an SNS subscription was confirmed.
    pub confirmed: bool,
}

/// Authenticates a provider's request for the account's source and records its events.
/// An unknown source and a request that fails its provider's authentication are refused
/// alike; an authenticated request whose events match nothing of the account is accepted
/// with the events counted as ignored.
///
/// SES: the SNS message's topic must be one of the source's, its signing certificate is
/// fetched only from an SNS host (checked before any fetch) and its signature verified; a
/// `SubscriptionConfirmation` is then confirmed by fetching its `SubscribeURL` (SNS hosts
/// only too). Mailgun: the HMAC under the sealed signing key, a timestamp within 5
/// minutes, and a token not seen before. SendGrid: the ECDSA signature of the timestamp
/// and body. Postmark: the basic-auth password whose hash the source keeps.
///
/// # Errors
/// [`AppError::Unauthorized`] as above; [`AppError::BadRequest`] for an authenticated
/// request whose payload is malformed; [`AppError::Unavailable`] when the SNS
/// certificate or confirmation cannot be fetched (the provider retries).
pub fn receive_provider_events(
    services: &Services,
    account: AccountId,
    id: FeedbackSourceId,
    request: &ProviderRequest,
) -> Result<ReceiveOutcome, AppError> {
    let source = in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.find_feedback_source(account, id)?)
    })?
    .ok_or(AppError::Unauthorized)?;
    let now = services.clock.now();
    let mut mailgun_token = None;
    let reports: Vec<FeedbackReport> = match source.provider {
        Provider::Ses => {
            let message = SnsMessage::parse(&request.body).map_err(|_| AppError::Unauthorized)?;
            if !source.topic_arns.contains(&message.topic_arn) {
                return Err(AppError::Unauthorized);
            }
            // Before any certificate is fetched: a replayed old message costs no fetch.
            if !message.fresh(now) {
                return Err(AppError::Unauthorized);
            }
            let key = signing_key(services, &message.signing_cert_url)?;
            message.verify(&key).map_err(|_| AppError::Unauthorized)?;
            match message.kind.as_str() {
                "SubscriptionConfirmation" => {
                    confirm_subscription(services, &message)?;
                    count(services, &source, 0, 0)?;
                    return Ok(ReceiveOutcome {
                        confirmed: true,
                        ..ReceiveOutcome::default()
                    });
                }
                "Notification" => ses::reports(&message.message).map_err(AppError::BadRequest)?,
                _ => Vec::new(),
            }
        }
        Provider::Mailgun => {
            let request =
                MailgunRequest::parse(&request.body).map_err(|_| AppError::Unauthorized)?;
            let sealed = source.signing_key.as_ref().ok_or(AppError::Unauthorized)?;
            let key = services
                .secrets
                .open(sealed, &signing_key_slot(account, id))
                .map_err(|error| AppError::Internal(error.to_string()))?;
            let unix_now = i64::try_from(now.unix_millis() / 1000).unwrap_or(i64::MAX);
            request
                .verify(key.expose().as_bytes(), unix_now)
                .map_err(|_| AppError::Unauthorized)?;
            let replayed = in_transaction(services.db.as_ref(), |tx| {
                Ok(tx.feedback_token_seen(account, id, &request.token)?)
            })?;
            if replayed {
                return Err(AppError::Unauthorized);
            }
            mailgun_token = Some(request.token.clone());
            vec![request.report().map_err(AppError::BadRequest)?]
        }
        Provider::Sendgrid => {
            let key = source
                .public_key
                .as_deref()
                .and_then(|key| sendgrid::verifying_key(key).ok())
                .ok_or(AppError::Unauthorized)?;
            let signature = request.header(sendgrid::SIGNATURE_HEADER);
            let timestamp = request.header(sendgrid::TIMESTAMP_HEADER);
            let (Some(signature), Some(timestamp)) = (signature, timestamp) else {
                return Err(AppError::Unauthorized);
            };
            let unix_now = i64::try_from(now.unix_millis() / 1000).unwrap_or(i64::MAX);
            if !sendgrid::fresh(timestamp, unix_now) {
                return Err(AppError::Unauthorized);
            }
            if !sendgrid::verify(&key, signature, timestamp, &request.body) {
                return Err(AppError::Unauthorized);
            }
            sendgrid::reports(&request.body).map_err(AppError::BadRequest)?
        }
        Provider::Postmark => {
            let stored = source.secret_hash.as_ref().ok_or(AppError::Unauthorized)?;
            if !postmark::authorized(request.header("authorization"), stored) {
                return Err(AppError::Unauthorized);
            }
            vec![postmark::report(&request.body).map_err(AppError::BadRequest)?]
        }
    };
    let mut outcome = ReceiveOutcome {
        received: reports.len(),
        ..ReceiveOutcome::default()
    };
    for report in &reports {
        if matches!(report.kind, FeedbackKind::Ignored { .. }) {
            outcome.ignored += 1;
            continue;
        }
        match record_report(services, account, None, report) {
            Ok(recorded) if recorded.recorded => outcome.recorded += 1,
            Ok(_) => outcome.ignored += 1,
            // Nothing of the account matches: accepted and counted, so the provider
            // does not retry an event that can never match.
            Err(AppError::BadRequest(reason)) => {
                tracing::info!(%account, source = %id, %reason, "provider event matches nothing");
                outcome.ignored += 1;
            }
            Err(error) => return Err(error),
        }
    }
    // Remembered only once its event is recorded: a retry after a failure above is still
    // accepted, and a replay of a recorded event would change nothing anyway.
    in_transaction(services.db.as_ref(), |tx| {
        if let Some(token) = &mailgun_token {
            let forget_before = now.plus(time::Duration::seconds(-2 * mailgun::MAX_SKEW_SECS));
            tx.remember_feedback_token(account, id, token, now, forget_before)?;
        }
        Ok(())
    })?;
    count(
        services,
        &source,
        i64::try_from(outcome.recorded).unwrap_or(i64::MAX),
        i64::try_from(outcome.ignored).unwrap_or(i64::MAX),
    )?;
    Ok(outcome)
}

fn count(
    services: &Services,
    source: &FeedbackSourceRecord,
    recorded: i64,
    ignored: i64,
) -> Result<(), AppError> {
    let now = services.clock.now();
    in_transaction(services.db.as_ref(), |tx| {
        tx.count_feedback_source_events(source.account_id, source.id, recorded, ignored, now)?;
        Ok(())
    })
}

/// The key of the message's signing certificate: from the cache, else fetched, but only
/// from an allowed SNS URL.
fn signing_key(services: &Services, url: &str) -> Result<rsa::RsaPublicKey, AppError> {
    let sns = &services.sns;
    let url = allowed_url(url, SnsUrl::Certificate, sns.test_origin.as_deref())
        .ok_or(AppError::Unauthorized)?;
    if let Some(key) = sns.certificates.get(url.as_str()) {
        return Ok(key);
    }
    let answer = sns
        .client
        .get(url.as_str(), MAX_SNS_ANSWER_BYTES)
        .map_err(|error| {
            AppError::Unavailable(format!("fetching the SNS signing certificate: {error}"))
        })?;
    // A certificate SNS says it does not have (403, 404) cannot authenticate anything:
    // 401, which counts as a failed authentication of the client, so made-up certificate
    // names cannot buy unlimited fetches. Any other answer (5xx, 429) is SNS's trouble,
    // not the sender's: 503, and SNS retries.
    match answer.status {
        200 => {}
        403 | 404 => {
            tracing::info!(status = answer.status, %url, "the SNS signing certificate is not served");
            return Err(AppError::Unauthorized);
        }
        status => {
            return Err(AppError::Unavailable(format!(
                "the SNS signing certificate answered {status}"
            )))
        }
    }
    let key = ses::certificate_key(&answer.body).map_err(|_| AppError::Unauthorized)?;
    sns.certificates.insert(url.as_str(), key.clone());
    Ok(key)
}

fn confirm_subscription(services: &Services, message: &SnsMessage) -> Result<(), AppError> {
    let sns = &services.sns;
    let url = message
        .subscribe_url
        .as_deref()
        .and_then(|url| allowed_url(url, SnsUrl::Subscribe, sns.test_origin.as_deref()))
        .ok_or_else(|| AppError::BadRequest("the SubscribeURL is not an SNS endpoint".into()))?;
    let answer = sns
        .client
        .get(url.as_str(), MAX_SNS_ANSWER_BYTES)
        .map_err(|error| AppError::Unavailable(format!("confirming the subscription: {error}")))?;
    if answer.status != 200 {
        return Err(AppError::Unavailable(format!(
            "confirming the subscription: SNS answered {}",
            answer.status
        )));
    }
    tracing::info!(topic = %message.topic_arn, "confirmed an SNS subscription");
    Ok(())
}
