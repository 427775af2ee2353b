//! The system adapters of the small ports: wall clock, UUIDv7 ids, and secrets sealed with
//! XChaCha20-Poly1305.

use chacha20poly1305::{
    aead::{Aead, AeadCore, KeyInit, Payload},
    XChaCha20Poly1305, XNonce,
};
use hmac::{Hmac, Mac};
use mailroom_app::ports::{Clock, Ids, SealedSecret, SecretSlot, Secrets, UnsealError};
use mailroom_domain::{secret::SecretString, Timestamp, Uuid};
use rand::{rngs::OsRng, RngCore};
use sha2::{Digest, Sha256};

/// The operating system's clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_datetime(time::OffsetDateTime::now_utc())
    }
}

/// UUIDv7 ids (time-ordered, monotonic within the process).
pub struct UuidV7Ids;

impl Ids for UuidV7Ids {
    fn next_uuid(&self) -> Uuid {
        Uuid::now_v7()
    }
}

const FORMAT_VERSION: u8 = 1;
const KEY_ID_LEN: usize = 4;
const NONCE_LEN: usize = 24;
const HEADER_LEN: usize = 1 + KEY_ID_LEN + NONCE_LEN;

/// Seals stored secrets with XChaCha20-Poly1305 under `MAILROOM_SECRET_KEY`, and opens
/// them with it or, during a key rotation, with `MAILROOM_SECRET_KEY_PREVIOUS`.
///
/// Layout: version byte, 4-byte key id (SHA-256 prefix of the key, so a wrong key is named
/// as such and the right one of the two is picked), 24-byte random nonce, ciphertext and
/// tag. The slot (table, column, row) is the associated data: a ciphertext copied
/// elsewhere does not open.
pub struct SealingSecrets {
    current: SealingKey,
    previous: Option<SealingKey>,
    /// HMAC-SHA256(secret key, [`LINK_KEY_LABEL`]): the link-signing key, its own key so
    /// a tag never doubles as anything the sealing key makes.
    link_key: [u8; 32],
    /// The link-signing key of `MAILROOM_SECRET_KEY_PREVIOUS`, so links mailed before a
    /// rotation still verify while it is set.
    previous_link_key: Option<[u8; 32]>,
}

struct SealingKey {
    cipher: XChaCha20Poly1305,
    id: [u8; KEY_ID_LEN],
}

impl SealingKey {
    fn new(key: &[u8; 32]) -> Self {
        let digest = Sha256::digest(key);
        let mut id = [0u8; KEY_ID_LEN];
        id.copy_from_slice(&digest[..KEY_ID_LEN]);
        Self {
            cipher: XChaCha20Poly1305::new(key.into()),
            id,
        }
    }
}

/// Derives the link-signing key from `MAILROOM_SECRET_KEY`. Changing it (or the secret
/// key) invalidates every tracking and unsubscribe link already sent.
const LINK_KEY_LABEL: &[u8] = b"mailroom tracking v1";

type HmacSha256 = Hmac<Sha256>;

fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut mac = <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC takes a key of any length");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// The tag of `message` for `purpose` under a link-signing key. The purpose ends at a
/// NUL, so ("ab", "c…") and ("a", "bc…") never collide.
fn link_tag(key: &[u8; 32], purpose: &str, message: &[u8]) -> [u8; 32] {
    hmac_sha256(key, &[purpose.as_bytes(), &[0], message])
}

impl SealingSecrets {
    /// Secrets under `key`.
    pub fn new(key: &[u8; 32]) -> Self {
        Self::with_previous(key, None)
    }

    /// Secrets sealed under `key`, opened with `key` or, for values sealed before a
    /// rotation, with `previous`.
    pub fn with_previous(key: &[u8; 32], previous: Option<&[u8; 32]>) -> Self {
        Self {
            current: SealingKey::new(key),
            previous: previous
                .filter(|previous| *previous != key)
                .map(SealingKey::new),
            link_key: hmac_sha256(key, &[LINK_KEY_LABEL]),
            previous_link_key: previous
                .filter(|previous| *previous != key)
                .map(|previous| hmac_sha256(previous, &[LINK_KEY_LABEL])),
        }
    }

    fn key_for(&self, bytes: &[u8]) -> Option<&SealingKey> {
        let id = &bytes[1..=KEY_ID_LEN];
        std::iter::once(&self.current)
            .chain(self.previous.as_ref())
            .find(|key| key.id == id)
    }

    fn associated_data(slot: &SecretSlot) -> Vec<u8> {
        format!("mailroom:{}.{}:{}", slot.table, slot.column, slot.row).into_bytes()
    }
}

impl Secrets for SealingSecrets {
    fn fill_random(&self, buf: &mut [u8]) {
        OsRng.fill_bytes(buf);
    }

    fn seal(&self, plaintext: &SecretString, slot: &SecretSlot) -> SealedSecret {
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let aad = Self::associated_data(slot);
        let ciphertext = self
            .current
            .cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: plaintext.expose().as_bytes(),
                    aad: &aad,
                },
            )
            .expect("XChaCha20-Poly1305 encryption of an in-memory buffer cannot fail");
        let mut sealed = Vec::with_capacity(HEADER_LEN + ciphertext.len());
        sealed.push(FORMAT_VERSION);
        sealed.extend_from_slice(&self.current.id);
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(&ciphertext);
        SealedSecret(sealed)
    }

    fn open(&self, sealed: &SealedSecret, slot: &SecretSlot) -> Result<SecretString, UnsealError> {
        let bytes = &sealed.0;
        if bytes.len() < HEADER_LEN || bytes[0] != FORMAT_VERSION {
            return Err(UnsealError("unknown format".into()));
        }
        let Some(key) = self.key_for(bytes) else {
            return Err(UnsealError(if self.previous.is_some() {
                "sealed under neither MAILROOM_SECRET_KEY nor MAILROOM_SECRET_KEY_PREVIOUS".into()
            } else {
                "sealed under another MAILROOM_SECRET_KEY".into()
            }));
        };
        let nonce = XNonce::from_slice(&bytes[1 + KEY_ID_LEN..HEADER_LEN]);
        let aad = Self::associated_data(slot);
        let plaintext = key
            .cipher
            .decrypt(
                nonce,
                Payload {
                    msg: &bytes[HEADER_LEN..],
                    aad: &aad,
                },
            )
            .map_err(|_| {
                UnsealError("authentication failed (tampered, or moved to another slot)".into())
            })?;
        String::from_utf8(plaintext)
            .map(SecretString::new)
            .map_err(|_| UnsealError("not UTF-8".into()))
    }

    fn sign(&self, purpose: &str, message: &[u8]) -> [u8; 32] {
        link_tag(&self.link_key, purpose, message)
    }

    fn sign_with_previous(&self, purpose: &str, message: &[u8]) -> Option<[u8; 32]> {
        self.previous_link_key
            .map(|key| link_tag(&key, purpose, message))
    }

    fn sealed_under_current_key(&self, sealed: &SealedSecret) -> bool {
        sealed.0.len() >= HEADER_LEN
            && sealed.0[0] == FORMAT_VERSION
            && sealed.0[1..=KEY_ID_LEN] == self.current.id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(row: &str) -> SecretSlot {
        SecretSlot {
            table: "webhook_configs",
            column: "signing_secret",
            row: row.into(),
        }
    }

    #[test]
    fn seals_and_opens_only_in_the_same_slot_under_the_same_key() {
        let secrets = SealingSecrets::new(&[7u8; 32]);
        let sealed = secrets.seal(&SecretString::new("whsec_abc"), &slot("a"));
        assert!(!sealed.0.windows(9).any(|w| w == b"whsec_abc"));
        assert_eq!(
            secrets.open(&sealed, &slot("a")).expect("opens").expose(),
            "whsec_abc"
        );
        assert!(secrets.open(&sealed, &slot("b")).is_err());
        assert!(SealingSecrets::new(&[8u8; 32])
            .open(&sealed, &slot("a"))
            .is_err());
        let again = secrets.seal(&SecretString::new("whsec_abc"), &slot("a"));
        assert_ne!(sealed, again, "nonces are random");
    }

    #[test]
    fn link_tags_are_hmac_under_a_derived_key_and_bound_to_their_purpose() {
        let secrets = SealingSecrets::new(&[7u8; 32]);
        let tag = secrets.sign("tracking", b"payload");
        assert_eq!(tag, secrets.sign("tracking", b"payload"), "deterministic");
        assert_ne!(tag, secrets.sign("unsubscribe", b"payload"));
        assert_ne!(tag, secrets.sign("tracking", b"payload2"));
        assert_ne!(
            tag,
            SealingSecrets::new(&[8u8; 32]).sign("tracking", b"payload")
        );
        // Not keyed by the secret key itself.
        assert_ne!(
            tag,
            hmac_sha256(&[7u8; 32], &[b"tracking", &[0], b"payload"])
        );
        let derived = hmac_sha256(&[7u8; 32], &[b"mailroom tracking v1"]);
        assert_eq!(tag, hmac_sha256(&derived, &[b"tracking", &[0], b"payload"]));
    }

    #[test]
    fn during_a_rotation_old_values_open_with_the_previous_key_and_new_ones_use_the_current() {
        let (a, b, c) = ([1u8; 32], [2u8; 32], [3u8; 32]);
        let old = SealingSecrets::new(&a).seal(&SecretString::new("pw"), &slot("r"));
        let rotating = SealingSecrets::with_previous(&b, Some(&a));
        assert_eq!(
            rotating.open(&old, &slot("r")).expect("opens").expose(),
            "pw"
        );
        assert!(!rotating.sealed_under_current_key(&old));
        assert!(
            rotating.open(&old, &slot("other")).is_err(),
            "still bound to its slot"
        );
        let new = rotating.seal(&SecretString::new("pw"), &slot("r"));
        assert!(rotating.sealed_under_current_key(&new));
        assert_eq!(
            SealingSecrets::new(&b)
                .open(&new, &slot("r"))
                .expect("B alone")
                .expose(),
            "pw"
        );
        assert!(SealingSecrets::new(&b).open(&old, &slot("r")).is_err());
        let error = SealingSecrets::with_previous(&c, Some(&b))
            .open(&old, &slot("r"))
            .expect_err("sealed under A");
        assert!(error.0.contains("neither"), "{}", error.0);
        // Links mailed before the rotation keep working while the previous key is set.
        let link = SealingSecrets::new(&a).sign("unsubscribe", b"payload");
        assert_eq!(
            rotating.sign_with_previous("unsubscribe", b"payload"),
            Some(link)
        );
        assert_ne!(rotating.sign("unsubscribe", b"payload"), link);
        assert_eq!(SealingSecrets::new(&b).sign_with_previous("x", b"y"), None);
    }
}
