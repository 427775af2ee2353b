//! The tokens of the public link endpoints: what a tracking or unsubscribe URL names, and
//! the HMAC tag that makes it unforgeable.
//!
//! A token is URL-safe base64 (no padding) of a version byte, a kind byte, the ids it
//! names (16 bytes each), for a click the link's position (2 bytes, big-endian), and the
//! first [`TAG_LEN`] bytes of HMAC-SHA256 over everything before it, keyed by the
//! [`Secrets`] port's link-signing key with a purpose (`tracking` or `unsubscribe`) bound
//! in. Nothing in a token is secret; the tag only proves the server minted it, so the
//! ids alone can never be turned into a working URL.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use mailroom_domain::{AccountId, ContactId, MessageId, Uuid};

use crate::ports::Secrets;

/// Bytes of the HMAC kept in a token: 128 bits, beyond guessing.
pub const TAG_LEN: usize = 16;
const VERSION: u8 = 1;
const OPEN: u8 = b'o';
const CLICK: u8 = b'c';
const UNSUBSCRIBE: u8 = b'u';
/// Longer text is refused before decoding (the longest token is 88 characters).
const MAX_TOKEN_CHARS: usize = 128;

/// What a token names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkToken {
    /// The open pixel of a message.
    Open {
        /// The message's account.
        account: AccountId,
        /// The message.
        message: MessageId,
    },
    /// One stored link of a message.
    Click {
        /// The message's account.
        account: AccountId,
        /// The message.
        message: MessageId,
        /// The link's position in the message's stored links.
        position: u16,
    },
    /// The unsubscribe page of the contact a message went to.
    Unsubscribe {
        /// The contact's account.
        account: AccountId,
        /// The contact.
        contact: ContactId,
        /// The message the link came in.
        message: MessageId,
    },
}

impl LinkToken {
    fn purpose(&self) -> &'static str {
        match self {
            Self::Open { .. } | Self::Click { .. } => "tracking",
            Self::Unsubscribe { .. } => "unsubscribe",
        }
    }

    fn payload(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(2 + 48 + 2);
        bytes.push(VERSION);
        match self {
            Self::Open { account, message } => {
                bytes.push(OPEN);
                bytes.extend_from_slice(account.as_uuid().as_bytes());
                bytes.extend_from_slice(message.as_uuid().as_bytes());
            }
            Self::Click {
                account,
                message,
                position,
            } => {
                bytes.push(CLICK);
                bytes.extend_from_slice(account.as_uuid().as_bytes());
                bytes.extend_from_slice(message.as_uuid().as_bytes());
                bytes.extend_from_slice(&position.to_be_bytes());
            }
            Self::Unsubscribe {
                account,
                contact,
                message,
            } => {
                bytes.push(UNSUBSCRIBE);
                bytes.extend_from_slice(account.as_uuid().as_bytes());
                bytes.extend_from_slice(contact.as_uuid().as_bytes());
                bytes.extend_from_slice(message.as_uuid().as_bytes());
            }
        }
        bytes
    }

    /// The token's text, for a URL path segment.
    pub fn encode(&self, secrets: &dyn Secrets) -> String {
        let mut bytes = self.payload();
        let tag = secrets.sign(self.purpose(), &bytes);
        bytes.extend_from_slice(&tag[..TAG_LEN]);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The token `text` names, when the server minted it; `None` for anything else
    /// (malformed, truncated, another key, a tag of another purpose).
    pub fn decode(text: &str, secrets: &dyn Secrets) -> Option<Self> {
        if text.len() > MAX_TOKEN_CHARS {
            return None;
        }
        let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
        if bytes.len() < 2 + TAG_LEN || bytes[0] != VERSION {
            return None;
        }
        let (payload, tag) = bytes.split_at(bytes.len() - TAG_LEN);
        let ids = &payload[2..];
        let token = match (payload[1], ids.len()) {
            (OPEN, 32) => Self::Open {
                account: AccountId::from_uuid(uuid_at(ids, 0)?),
                message: MessageId::from_uuid(uuid_at(ids, 1)?),
            },
            (CLICK, 34) => Self::Click {
                account: AccountId::from_uuid(uuid_at(ids, 0)?),
                message: MessageId::from_uuid(uuid_at(ids, 1)?),
                position: u16::from_be_bytes([ids[32], ids[33]]),
            },
            (UNSUBSCRIBE, 48) => Self::Unsubscribe {
                account: AccountId::from_uuid(uuid_at(ids, 0)?),
                contact: ContactId::from_uuid(uuid_at(ids, 1)?),
                message: MessageId::from_uuid(uuid_at(ids, 2)?),
            },
            _ => return None,
        };
        let expected = secrets.sign(token.purpose(), payload);
        let previous = secrets.sign_with_previous(token.purpose(), payload);
        let valid = constant_time_eq(&expected[..TAG_LEN], tag)
            || previous.is_some_and(|previous| constant_time_eq(&previous[..TAG_LEN], tag));
        valid.then_some(token)
    }
}

fn uuid_at(ids: &[u8], index: usize) -> Option<Uuid> {
    let bytes: [u8; 16] = ids.get(index * 16..(index + 1) * 16)?.try_into().ok()?;
    Some(Uuid::from_bytes(bytes))
}

/// Compares without an early exit, so the time taken says nothing about where a forged
/// tag first differs.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::{SealedSecret, SecretSlot, UnsealError};
    use mailroom_domain::secret::SecretString;

    /// A stand-in signer: not HMAC, but keyed and purpose-bound, which is all the token
    /// format relies on.
    struct FakeSigner(u8);

    impl Secrets for FakeSigner {
        fn fill_random(&self, _: &mut [u8]) {}
        fn seal(&self, _: &SecretString, _: &SecretSlot) -> SealedSecret {
            SealedSecret(Vec::new())
        }
        fn open(&self, _: &SealedSecret, _: &SecretSlot) -> Result<SecretString, UnsealError> {
            Err(UnsealError("fake".into()))
        }
        fn sign(&self, purpose: &str, message: &[u8]) -> [u8; 32] {
            let mut tag = [self.0; 32];
            for (i, byte) in purpose.bytes().chain(message.iter().copied()).enumerate() {
                tag[i % 32] = tag[i % 32].wrapping_mul(31).wrapping_add(byte);
            }
            tag
        }
    }

    fn ids() -> (AccountId, MessageId, ContactId) {
        (
            AccountId::from_uuid(Uuid::from_u128(1)),
            MessageId::from_uuid(Uuid::from_u128(2)),
            ContactId::from_uuid(Uuid::from_u128(3)),
        )
    }

    #[test]
    fn every_kind_round_trips_and_is_url_safe() {
        let (account, message, contact) = ids();
        let signer = FakeSigner(7);
        for token in [
            LinkToken::Open { account, message },
            LinkToken::Click {
                account,
                message,
                position: 513,
            },
            LinkToken::Unsubscribe {
                account,
                contact,
                message,
            },
        ] {
            let text = token.encode(&signer);
            assert!(text.len() <= MAX_TOKEN_CHARS, "{text}");
            assert!(
                text.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
                "{text}"
            );
            assert_eq!(LinkToken::decode(&text, &signer), Some(token));
            assert_eq!(
                LinkToken::decode(&text, &FakeSigner(8)),
                None,
                "another key"
            );
        }
    }

    #[test]
    fn tampered_truncated_and_foreign_tokens_are_refused() {
        let (account, message, _) = ids();
        let signer = FakeSigner(7);
        let text = LinkToken::Click {
            account,
            message,
            position: 0,
        }
        .encode(&signer);
        let mut bytes = URL_SAFE_NO_PAD.decode(&text).expect("base64");
        // Point the click at position 1 without re-signing.
        let position = bytes.len() - TAG_LEN - 1;
        bytes[position] = 1;
        assert_eq!(
            LinkToken::decode(&URL_SAFE_NO_PAD.encode(&bytes), &signer),
            None
        );
        assert_eq!(LinkToken::decode(&text[..text.len() - 2], &signer), None);
        for garbage in ["", "x", "%%%", "AAAA", &"A".repeat(500)] {
            assert_eq!(LinkToken::decode(garbage, &signer), None, "{garbage}");
        }
        // An open token re-labelled as a click (kind byte and length changed) fails: the
        // tag covers the kind.
        let open = LinkToken::Open { account, message }.encode(&signer);
        let mut bytes = URL_SAFE_NO_PAD.decode(&open).expect("base64");
        bytes[1] = CLICK;
        bytes.splice(34..34, [0u8, 0u8]);
        assert_eq!(
            LinkToken::decode(&URL_SAFE_NO_PAD.encode(&bytes), &signer),
            None
        );
    }
}
