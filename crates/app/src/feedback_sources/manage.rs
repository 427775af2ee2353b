//! Creating, reading and deleting an account's feedback sources.

use base64::Engine as _;
use mailroom_domain::{
    feedback_source::{is_topic_arn, Provider, MAX_KEY_CHARS, MAX_TOPIC_ARNS},
    secret::SecretString,
    FeedbackSourceId, FieldError, ValidationErrors,
};

use super::{events_path, postmark, sendgrid, signing_key_slot, MAX_SOURCES};
use crate::{
    auth::Member,
    ports::{in_transaction, FeedbackSourceRecord},
    AppError, Services,
};

/// What a caller sends to create a source; only the fields of its provider may be set.
#[derive(Debug, Clone, Default)]
pub struct FeedbackSourceInput {
    /// `ses`, `postmark`, `mailgun` or `sendgrid`.
    pub provider: String,
    /// SES: the SNS topic ARNs whose messages are accepted (1 to 10).
    pub topic_arns: Option<Vec<String>>,
    /// Mailgun: the HTTP webhook signing key.
    pub signing_key: Option<SecretString>,
    /// SendGrid: the signed event webhook's verification key (base64 DER).
    pub public_key: Option<String>,
}

/// A source with the URL its provider posts to.
#[derive(Debug, Clone)]
pub struct FeedbackSource {
    /// The stored source.
    pub record: FeedbackSourceRecord,
    /// `{MAILROOM_PUBLIC_URL}/v2/feedback-sources/{accountId}/{id}/events`.
    pub url: String,
}

/// A new source. For Postmark it also carries the generated secret, shown only now.
#[derive(Debug, Clone)]
pub struct CreatedFeedbackSource {
    /// The source.
    pub source: FeedbackSource,
    /// Postmark: the basic-auth password to put in the webhook URL.
    pub secret: Option<SecretString>,
    /// Postmark: the URL with the credentials in it, as Postmark's webhook form takes it.
    pub url_with_credentials: Option<SecretString>,
}

fn with_url(services: &Services, record: FeedbackSourceRecord) -> FeedbackSource {
    let url = format!(
        "{}{}",
        services.links.public_url,
        events_path(record.account_id, record.id)
    );
    FeedbackSource { record, url }
}

/// Creates a source: checks the provider's configuration, seals a Mailgun signing key,
/// and for Postmark generates a secret of which only the SHA-256 is stored.
///
/// # Errors
/// [`AppError::Invalid`] naming each bad field; [`AppError::BadRequest`] when the account
/// has [`MAX_SOURCES`] already.
pub fn create_feedback_source(
    services: &Services,
    member: &Member,
    input: FeedbackSourceInput,
) -> Result<CreatedFeedbackSource, AppError> {
    let account = member.account();
    let id = FeedbackSourceId::from_uuid(services.ids.next_uuid());
    let provider = Provider::parse(input.provider.trim()).ok_or_else(|| {
        AppError::invalid(
            "provider",
            "must be one of ses, postmark, mailgun, sendgrid",
        )
    })?;
    let mut errors = Vec::new();
    let mut refuse_unless = |provider_field: Provider, field: &str, present: bool| {
        if present && provider != provider_field {
            errors.push(FieldError::new(
                field,
                format!("applies to {provider_field} sources only"),
            ));
        }
        if !present && provider == provider_field {
            errors.push(FieldError::new(
                field,
                format!("is required for {provider}"),
            ));
        }
    };
    refuse_unless(Provider::Ses, "topicArns", input.topic_arns.is_some());
    refuse_unless(Provider::Mailgun, "signingKey", input.signing_key.is_some());
    refuse_unless(Provider::Sendgrid, "publicKey", input.public_key.is_some());
    let mut topic_arns: Vec<String> = Vec::new();
    if let Some(arns) = &input.topic_arns {
        for arn in arns {
            let arn = arn.trim();
            if !is_topic_arn(arn) {
                errors.push(FieldError::new(
                    "topicArns",
                    format!("{arn:?} is not an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:TOPIC)"),
                ));
            } else if !topic_arns.iter().any(|known| known == arn) {
                topic_arns.push(arn.to_owned());
            }
        }
        if arns.is_empty() || arns.len() > MAX_TOPIC_ARNS {
            errors.push(FieldError::new(
                "topicArns",
                format!("must list 1 to {MAX_TOPIC_ARNS} topic ARNs"),
            ));
        }
    }
    if let Some(key) = &input.signing_key {
        let key = key.expose();
        if key.trim().is_empty() || key.len() > MAX_KEY_CHARS || key.trim() != key {
            errors.push(FieldError::new(
                "signingKey",
                format!("must be the signing key as Mailgun shows it (1 to {MAX_KEY_CHARS} characters, no spaces around)"),
            ));
        }
    }
    if let Some(key) = &input.public_key {
        if key.len() > MAX_KEY_CHARS {
            errors.push(FieldError::new("publicKey", "is too long"));
        } else if let Err(problem) = sendgrid::verifying_key(key) {
            errors.push(FieldError::new("publicKey", problem));
        }
    }
    if !errors.is_empty() {
        return Err(AppError::Invalid(ValidationErrors(errors)));
    }
    let signing_key = input
        .signing_key
        .as_ref()
        .map(|key| services.secrets.seal(key, &signing_key_slot(account, id)));
    let secret = (provider == Provider::Postmark).then(|| {
        let mut bytes = [0u8; 32];
        services.secrets.fill_random(&mut bytes);
        SecretString::new(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
    });
    let record = FeedbackSourceRecord {
        account_id: account,
        id,
        provider,
        topic_arns,
        signing_key,
        public_key: input.public_key.map(|key| key.trim().to_owned()),
        secret_hash: secret
            .as_ref()
            .map(|secret| postmark::secret_hash(secret.expose())),
        created_at: services.clock.now(),
        last_event_at: None,
        events_recorded: 0,
        events_ignored: 0,
    };
    in_transaction(services.db.as_ref(), |tx| {
        if tx.list_feedback_sources(account)?.len() >= MAX_SOURCES {
            return Err(AppError::BadRequest(format!(
                "an account may have at most {MAX_SOURCES} feedback sources"
            )));
        }
        tx.insert_feedback_source(&record)?;
        Ok(())
    })?;
    let source = with_url(services, record);
    let url_with_credentials = secret.as_ref().map(|secret| {
        let (scheme, rest) = source
            .url
            .split_once("://")
            .unwrap_or(("https", source.url.as_str()));
        SecretString::new(format!(
            "{scheme}://{}:{}@{rest}",
            postmark::USERNAME,
            secret.expose()
        ))
    });
    Ok(CreatedFeedbackSource {
        source,
        secret,
        url_with_credentials,
    })
}

/// The account's sources, oldest first.
///
/// # Errors
/// [`AppError`] from the store.
pub fn list_feedback_sources(
    services: &Services,
    member: &Member,
) -> Result<Vec<FeedbackSource>, AppError> {
    let account = member.account();
    let records = in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.list_feedback_sources(account)?)
    })?;
    Ok(records
        .into_iter()
        .map(|record| with_url(services, record))
        .collect())
}

/// One source.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown source (or another account's).
pub fn get_feedback_source(
    services: &Services,
    member: &Member,
    id: FeedbackSourceId,
) -> Result<FeedbackSource, AppError> {
    let account = member.account();
    let record = in_transaction(services.db.as_ref(), |tx| {
        tx.find_feedback_source(account, id)?
            .ok_or(AppError::NotFound)
    })?;
    Ok(with_url(services, record))
}

/// Deletes a source and returns it; its URL answers 401 from then on.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown source (or another account's).
pub fn delete_feedback_source(
    services: &Services,
    member: &Member,
    id: FeedbackSourceId,
) -> Result<FeedbackSource, AppError> {
    let account = member.account();
    let record = in_transaction(services.db.as_ref(), |tx| {
        let record = tx
            .find_feedback_source(account, id)?
            .ok_or(AppError::NotFound)?;
        tx.delete_feedback_source(account, id)?;
        Ok(record)
    })?;
    Ok(with_url(services, record))
}
