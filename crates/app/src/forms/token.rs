//! The signed tokens of a form's public pages, made with the link-signing machinery of
//! the tracking and unsubscribe links ([`Secrets::sign`], a purpose of their own bound
//! in, the previous key honoured during a key rotation).
//!
//! - The **confirmation token** (`/f/{formKey}/confirm/{token}`) names the account, the
//!   confirmation row and the link's expiry; the row makes it single-use.
//! - The **time token** (a hidden field of the hosted page) names the account, the form
//!   and when the page was served, so a post can be refused when it comes too soon
//!   after the page (a script, not a person) or with a token never served.
//!
//! Each is URL-safe base64 (no padding) of a version byte, a kind byte, the ids (16 bytes
//! each), a time (8 bytes, Unix seconds, big-endian) and the first
//! [`TAG_LEN`](crate::tracking::token::TAG_LEN) bytes of the HMAC over what precedes it.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use mailroom_domain::{AccountId, FormConfirmationId, FormId, Timestamp, Uuid};

use crate::{ports::Secrets, tracking::token::TAG_LEN};

const VERSION: u8 = 1;
const CONFIRM: u8 = b'f';
const PAGE: u8 = b'p';
const CONFIRM_PURPOSE: &str = "form confirmation";
const PAGE_PURPOSE: &str = "form page";
/// Longer text is refused before decoding (a token is 80 characters).
const MAX_TOKEN_CHARS: usize = 128;

/// What a form token names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormToken {
    /// A confirmation link.
    Confirm {
        /// The form's account.
        account: AccountId,
        /// The confirmation row.
        confirmation: FormConfirmationId,
        /// Unix seconds after which the link is refused.
        expires: i64,
    },
    /// The hosted page as served.
    Page {
        /// The form's account.
        account: AccountId,
        /// The form.
        form: FormId,
        /// Unix seconds when the page was served.
        served: i64,
    },
}

impl FormToken {
    fn purpose(&self) -> &'static str {
        match self {
            Self::Confirm { .. } => CONFIRM_PURPOSE,
            Self::Page { .. } => PAGE_PURPOSE,
        }
    }

    fn payload(&self) -> Vec<u8> {
        let (kind, account, id, time) = match self {
            Self::Confirm {
                account,
                confirmation,
                expires,
            } => (CONFIRM, account, confirmation.as_uuid(), expires),
            Self::Page {
                account,
                form,
                served,
            } => (PAGE, account, form.as_uuid(), served),
        };
        let mut bytes = Vec::with_capacity(2 + 32 + 8);
        bytes.push(VERSION);
        bytes.push(kind);
        bytes.extend_from_slice(account.as_uuid().as_bytes());
        bytes.extend_from_slice(id.as_bytes());
        bytes.extend_from_slice(&time.to_be_bytes());
        bytes
    }

    /// The token's text, for a URL path segment or a form field.
    pub fn encode(&self, secrets: &dyn Secrets) -> String {
        let mut bytes = self.payload();
        let tag = secrets.sign(self.purpose(), &bytes);
        bytes.extend_from_slice(&tag[..TAG_LEN]);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The token `text` names, when the server minted it; `None` for anything else.
    pub fn decode(text: &str, secrets: &dyn Secrets) -> Option<Self> {
        if text.len() > MAX_TOKEN_CHARS {
            return None;
        }
        let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
        if bytes.len() != 2 + 32 + 8 + TAG_LEN || bytes[0] != VERSION {
            return None;
        }
        let (payload, tag) = bytes.split_at(bytes.len() - TAG_LEN);
        let account = AccountId::from_uuid(Uuid::from_bytes(payload[2..18].try_into().ok()?));
        let id = Uuid::from_bytes(payload[18..34].try_into().ok()?);
        let time = i64::from_be_bytes(payload[34..42].try_into().ok()?);
        let token = match payload[1] {
            CONFIRM => Self::Confirm {
                account,
                confirmation: FormConfirmationId::from_uuid(id),
                expires: time,
            },
            PAGE => Self::Page {
                account,
                form: FormId::from_uuid(id),
                served: time,
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

/// Unix seconds of `at`.
pub(crate) fn unix_seconds(at: Timestamp) -> i64 {
    at.as_datetime().unix_timestamp()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::{SealedSecret, SecretSlot, UnsealError};
    use mailroom_domain::secret::SecretString;

    /// HMAC under a one-byte key: the signer's shape, with a key of the test's choosing.
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
            use hmac::{Hmac, Mac};
            let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(&[self.0])
                .expect("HMAC takes a key of any length");
            mac.update(purpose.as_bytes());
            mac.update(&[0]);
            mac.update(message);
            mac.finalize().into_bytes().into()
        }
    }

    #[test]
    fn tokens_round_trip_and_forgeries_are_refused() {
        let account = AccountId::from_uuid(Uuid::from_u128(1));
        let signer = FakeSigner(3);
        let confirm = FormToken::Confirm {
            account,
            confirmation: FormConfirmationId::from_uuid(Uuid::from_u128(2)),
            expires: 1_800_000_000,
        };
        let page = FormToken::Page {
            account,
            form: FormId::from_uuid(Uuid::from_u128(2)),
            served: 1_800_000_000,
        };
        for token in [confirm, page] {
            let text = token.encode(&signer);
            assert!(text.len() <= MAX_TOKEN_CHARS);
            assert_eq!(FormToken::decode(&text, &signer), Some(token));
            assert_eq!(FormToken::decode(&text, &FakeSigner(4)), None);
        }
        // The same ids and time as a page token do not make a confirmation: the kind and
        // the purpose are signed.
        let mut bytes = URL_SAFE_NO_PAD
            .decode(page.encode(&signer))
            .expect("base64");
        bytes[1] = CONFIRM;
        assert_eq!(
            FormToken::decode(&URL_SAFE_NO_PAD.encode(&bytes), &signer),
            None
        );
        // A later expiry without re-signing.
        let mut bytes = URL_SAFE_NO_PAD
            .decode(confirm.encode(&signer))
            .expect("base64");
        bytes[40] ^= 1;
        assert_eq!(
            FormToken::decode(&URL_SAFE_NO_PAD.encode(&bytes), &signer),
            None
        );
        for garbage in ["", "x", &"A".repeat(300)] {
            assert_eq!(FormToken::decode(garbage, &signer), None);
        }
    }
}
