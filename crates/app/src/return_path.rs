//! VERP return paths (docs/operations.md#sending-domains): the envelope sender of mail
//! from a domain whose return path is verified, and the two use cases of the inbound SMTP
//! listener that receives what comes back to it.
//!
//! [`envelope_sender`] mints `bounces+<token>@bounces.<domain>` for a message
//! ([`mailroom_domain::return_path`], the HMAC under the link-signing key with purpose
//! `return-path`). [`check_recipient`] judges a `RCPT TO`: the domain names the sending
//! domain and so its account, the token's tag must verify for that account and the
//! message must be that account's. [`receive_report`] takes the message body apart and
//! hands a DSN or ARF report to [`crate::feedback::record_report`], the same rules as
//! `POST …/feedback`.

use mailroom_domain::{
    message::Message,
    return_path::{NotReturnPath, ReturnPathAddress, ReturnPathToken, PURPOSE},
    sending_domain::DomainName,
    AccountId, MessageId,
};

use crate::{
    feedback::{parse_feedback, record_report, FeedbackType},
    ports::{in_transaction, Secrets},
    AppError, Services,
};

/// At most this many accounts are tried for one return-path domain (two accounts may
/// both verify one domain; more is not a case worth an unbounded loop).
const MAX_ACCOUNTS_PER_DOMAIN: u32 = 8;

/// The VERP envelope sender of `message`, sent from the verified `domain`.
pub fn envelope_sender(services: &Services, message: &Message, domain: &DomainName) -> String {
    let secrets = services.secrets.as_ref();
    ReturnPathToken::mint(message.account_id, message.id, |bytes| {
        secrets.sign(PURPOSE, bytes)
    })
    .address(domain)
}

/// The message a verified return-path address names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReturnPathTarget {
    /// The account of the sending domain.
    pub account: AccountId,
    /// The message the token names, proven to be the account's.
    pub message: MessageId,
}

/// Why a `RCPT TO` is refused, as counted (`reason` label) and answered (550).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecipientRefusal {
    /// Not a `bounces.<domain>` address: relaying is refused.
    Relay,
    /// A return-path domain of no sending domain with a verified return path.
    UnknownDomain,
    /// A malformed token, or one whose tag does not verify (forged, another key).
    BadToken,
    /// The tag verifies but the message is gone.
    UnknownMessage,
}

impl RecipientRefusal {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Relay => "relay_refused",
            Self::UnknownDomain => "unknown_domain",
            Self::BadToken => "bad_token",
            Self::UnknownMessage => "unknown_message",
        }
    }
}

/// Judges a `RCPT TO` address (without angle brackets) of the inbound listener.
///
/// # Errors
/// `Ok(Err(refusal))` for an address refused; `Err` when the store fails (the listener
/// answers 451 and the sender retries).
pub fn check_recipient(
    services: &Services,
    address: &str,
) -> Result<Result<ReturnPathTarget, RecipientRefusal>, AppError> {
    let parsed = match ReturnPathAddress::parse(address) {
        Ok(parsed) => parsed,
        Err(NotReturnPath::OtherDomain) => return Ok(Err(RecipientRefusal::Relay)),
        Err(NotReturnPath::MalformedToken) => return Ok(Err(RecipientRefusal::BadToken)),
    };
    in_transaction(services.db.as_ref(), |tx| {
        let accounts = tx.return_path_accounts(&parsed.domain, MAX_ACCOUNTS_PER_DOMAIN)?;
        if accounts.is_empty() {
            return Ok(Err(RecipientRefusal::UnknownDomain));
        }
        let Some(account) = accounts
            .into_iter()
            .find(|&account| verifies(services.secrets.as_ref(), &parsed.token, account))
        else {
            return Ok(Err(RecipientRefusal::BadToken));
        };
        let message = parsed.token.message();
        Ok(match tx.find_message(account, message)? {
            Some(_) => Ok(ReturnPathTarget { account, message }),
            None => Err(RecipientRefusal::UnknownMessage),
        })
    })
}

/// Whether the token's tag verifies for `account` under the current key or, during a key
/// rotation, the previous one (mail sent before the rotation still bounces back).
fn verifies(secrets: &dyn Secrets, token: &ReturnPathToken, account: AccountId) -> bool {
    token.verify(account, |bytes| secrets.sign(PURPOSE, bytes))
        || secrets
            .sign_with_previous(
                PURPOSE,
                &mailroom_domain::return_path::signed_bytes(account, token.message()),
            )
            .is_some_and(|previous| token.verify(account, |_| previous))
}

/// What became of a message received for a return-path address. Every variant is
/// answered 250 except [`InboundOutcome::Deferred`]: the report was recorded, or
/// deliberately dropped (a bounce is never answered with a bounce).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InboundOutcome {
    /// A bounce or complaint recorded (a first report).
    Recorded(FeedbackType),
    /// A report of something already recorded: nothing changed.
    Repeated(FeedbackType),
    /// A report that records nothing (a delay, a success notice).
    Ignored,
    /// Not a DSN or ARF report (an auto-reply, spam): dropped.
    NotAReport,
    /// A report that matches no message or contact of the account: dropped.
    NoMatch,
    /// The store failed: answer 451 so the sender tries again later.
    Deferred,
}

impl InboundOutcome {
    /// The metric label.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Recorded(FeedbackType::Bounce) => "recorded_bounce",
            Self::Recorded(FeedbackType::Complaint) => "recorded_complaint",
            Self::Recorded(FeedbackType::Ignored) | Self::Ignored => "ignored",
            Self::Repeated(_) => "repeated",
            Self::NotAReport => "dropped_not_a_report",
            Self::NoMatch => "dropped_no_match",
            Self::Deferred => "deferred",
        }
    }
}

/// Records the message `raw` received for `target` (a verified return-path address):
/// a DSN or ARF report goes through [`record_report`] with the token's message as the
/// known message; anything else is dropped. Blocking: call it off the async runtime.
pub fn receive_report(services: &Services, target: ReturnPathTarget, raw: &[u8]) -> InboundOutcome {
    let Ok(report) = parse_feedback(raw) else {
        return InboundOutcome::NotAReport;
    };
    match record_report(services, target.account, Some(target.message), &report) {
        Ok(outcome) if outcome.kind == FeedbackType::Ignored => InboundOutcome::Ignored,
        Ok(outcome) if outcome.recorded => InboundOutcome::Recorded(outcome.kind),
        Ok(outcome) => InboundOutcome::Repeated(outcome.kind),
        Err(AppError::BadRequest(_) | AppError::Invalid(_) | AppError::NotFound) => {
            InboundOutcome::NoMatch
        }
        Err(error) => {
            tracing::warn!(%error, "an inbound report could not be recorded: deferred");
            InboundOutcome::Deferred
        }
    }
}

#[cfg(test)]
mod tests {
    use mailroom_domain::{secret::SecretString, Uuid};

    use super::*;
    use crate::ports::{SealedSecret, SecretSlot, UnsealError};

    /// A keyed stand-in for the HMAC (the token format relies only on it being keyed,
    /// deterministic and dependent on every input byte), with an optional previous key.
    struct Keys {
        current: u8,
        previous: Option<u8>,
    }

    fn tag(key: u8, purpose: &str, message: &[u8]) -> [u8; 32] {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut tag = [0u8; 32];
        for (i, chunk) in tag.chunks_mut(8).enumerate() {
            let mut hasher = DefaultHasher::new();
            (i, key, purpose, message).hash(&mut hasher);
            chunk.copy_from_slice(&hasher.finish().to_be_bytes());
        }
        tag
    }

    impl Secrets for Keys {
        fn fill_random(&self, _: &mut [u8]) {}
        fn seal(&self, _: &SecretString, _: &SecretSlot) -> SealedSecret {
            SealedSecret(Vec::new())
        }
        fn open(&self, _: &SealedSecret, _: &SecretSlot) -> Result<SecretString, UnsealError> {
            Err(UnsealError("fake".into()))
        }
        fn sign(&self, purpose: &str, message: &[u8]) -> [u8; 32] {
            tag(self.current, purpose, message)
        }
        fn sign_with_previous(&self, purpose: &str, message: &[u8]) -> Option<[u8; 32]> {
            self.previous.map(|key| tag(key, purpose, message))
        }
    }

    #[test]
    fn a_token_of_the_previous_key_verifies_during_a_rotation_only() {
        let account = AccountId::from_uuid(Uuid::from_u128(1));
        let message = MessageId::from_uuid(Uuid::from_u128(2));
        let old = Keys {
            current: 1,
            previous: None,
        };
        let token = ReturnPathToken::mint(account, message, |b| old.sign(PURPOSE, b));
        assert!(verifies(&old, &token, account));
        let rotating = Keys {
            current: 2,
            previous: Some(1),
        };
        assert!(verifies(&rotating, &token, account));
        let rotated = Keys {
            current: 2,
            previous: None,
        };
        assert!(!verifies(&rotated, &token, account));
        let other = AccountId::from_uuid(Uuid::from_u128(3));
        assert!(!verifies(&rotating, &token, other), "bound to the account");
        // A tag made for tracking links does not verify as a return path.
        let tracking = ReturnPathToken::mint(account, message, |b| old.sign("tracking", b));
        assert!(!verifies(&old, &tracking, account));
    }
}
