use mailroom_domain::{
    email::EmailAddress,
    message::{request_hash, send_due, Message},
    AccountId, ContactId, Timestamp,
};
use serde_json::{Map, Value};
use time::Duration;

use super::outbox::{queued_message, sender_domain, Addressee, Origin};
use crate::{
    auth::Member,
    ports::{in_transaction, UnitOfWork},
    AppError, Duplicate, Services, StoreError,
};

/// How long an `Idempotency-Key` keeps answering with the message it produced.
pub const IDEMPOTENCY_WINDOW: Duration = Duration::hours(24);

/// A transactional send: `POST /v2/accounts/{accountId}/messages`.
#[derive(Debug, Clone)]
pub struct TransactionalSend {
    /// The template's slug.
    pub slug: String,
    /// The recipient; the contact is created when unknown.
    pub email: EmailAddress,
    /// Template variables, winning over the contact's attributes.
    pub data: Map<String, Value>,
    /// The `Idempotency-Key` header, if sent.
    pub idempotency_key: Option<String>,
    /// `sendAt`: not before then (at most 30 days ahead); `None` sends now.
    pub send_at: Option<Timestamp>,
}

/// Queues one transactional email and returns it (`queued`), creating the contact when
/// the address is unknown so bounces and complaints attach to it. The worker sends it,
/// at once or at its `sendAt` (then `nextAttemptAt`); until then it can be cancelled
/// ([`super::cancel_message`]).
///
/// With an `Idempotency-Key`: the same key with the same body within
/// [`IDEMPOTENCY_WINDOW`] answers the message the first request queued (never a second
/// email, also for concurrent requests); the same key with another body is refused.
///
/// # Errors
/// [`AppError::Invalid`] on `slug` when the account has no such template, on `sendAt`
/// more than a minute past or more than 30 days ahead;
/// [`AppError::BadRequest`] when the key was used for another request;
/// [`AppError`] when the store fails.
pub fn send_transactional(
    services: &Services,
    member: &Member,
    request: &TransactionalSend,
) -> Result<Message, AppError> {
    let account = member.account();
    // Checked once, against the clock of the request: a replay of the request answers
    // the message it queued however late it comes.
    let due = send_due(request.send_at, services.clock.now())?;
    let hash = request.idempotency_key.as_ref().map(|_| {
        request_hash(
            &request.slug,
            request.email.as_str(),
            &request.data,
            request.send_at,
        )
    });
    // The store keeps keys unique, so of two concurrent first uses of one key one insert
    // is refused as a duplicate key; its transaction rolls back.
    let attempt = || {
        let mut key_taken = false;
        let result = in_transaction(services.db.as_ref(), |tx| {
            queue(
                tx,
                services,
                (account, request, due),
                hash.as_deref(),
                &mut key_taken,
            )
        });
        (result, key_taken)
    };
    let message = match attempt() {
        // A concurrent request with the same key committed first; its row is now
        // visible, so a second run answers it (or refuses a different body).
        (Err(_), true) => attempt().0,
        (result, _) => result,
    }?;
    // Committed: a worker may claim it now (an idempotent repeat wakes the workers for
    // nothing, which costs one empty claim).
    services.queue_wakeup.messages_queued();
    Ok(message)
}

fn queue(
    tx: &mut dyn UnitOfWork,
    services: &Services,
    (account, request, due): (AccountId, &TransactionalSend, Timestamp),
    hash: Option<&str>,
    key_taken: &mut bool,
) -> Result<Message, AppError> {
    let now = services.clock.now();
    let idempotency = request.idempotency_key.as_deref().zip(hash);
    if let Some((key, hash)) = idempotency {
        if let Some(existing) = tx.find_message_by_idempotency_key(account, key)? {
            if existing.message.created_at.plus(IDEMPOTENCY_WINDOW) > now {
                if existing.request_hash == hash {
                    return Ok(existing.message);
                }
                return Err(AppError::BadRequest(
                    "this Idempotency-Key was already used for a different request".into(),
                ));
            }
            // Expired: the key is free again.
            tx.release_idempotency_key(account, key)?;
        }
    }
    let template = tx
        .find_template_by_slug(account, &request.slug)?
        .ok_or_else(|| AppError::invalid("slug", "the account has no template with this slug"))?;
    let (contact, _created) = tx.upsert_contact(
        account,
        ContactId::from_uuid(services.ids.next_uuid()),
        &request.email,
        now,
    )?;
    let domain = sender_domain(tx, account, &template)?;
    let message = queued_message(
        services,
        account,
        &template,
        &domain,
        &Addressee {
            contact: contact.id,
            email: &contact.email,
        },
        Origin::Transactional,
        request.data.clone(),
        now,
        due,
    );
    tx.insert_message(&message, idempotency).map_err(|error| {
        *key_taken = matches!(error, StoreError::Duplicate(Duplicate::IdempotencyKey));
        AppError::from(error)
    })?;
    Ok(message)
}
