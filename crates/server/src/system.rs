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

/// Seals stored secrets with XChaCha20-Poly1305 under `MAILROOM_SECRET_KEY`.
///
/// Layout: version byte, 4-byte key id (SHA-256 prefix of the key, so a wrong key is named
/// as such), 24-byte random nonce, ciphertext and tag. The slot (table, column, row) is the
/// associated data: a ciphertext copied elsewhere does not open.
pub struct SealingSecrets {
    cipher: XChaCha20Poly1305,
    key_id: [u8; KEY_ID_LEN],
    /// HMAC-SHA256(secret key, [`LINK_KEY_LABEL`]): the link-signing key, its own key so
    /// a tag never doubles as anything the sealing key makes.
    link_key: [u8; 32],
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

impl SealingSecrets {
    /// Secrets under `key`.
    pub fn new(key: &[u8; 32]) -> Self {
        let digest = Sha256::digest(key);
        let mut key_id = [0u8; KEY_ID_LEN];
        key_id.copy_from_slice(&digest[..KEY_ID_LEN]);
        Self {
            cipher: XChaCha20Poly1305::new(key.into()),
            key_id,
            link_key: hmac_sha256(key, &[LINK_KEY_LABEL]),
        }
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
        sealed.extend_from_slice(&self.key_id);
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(&ciphertext);
        SealedSecret(sealed)
    }

    fn open(&self, sealed: &SealedSecret, slot: &SecretSlot) -> Result<SecretString, UnsealError> {
        let bytes = &sealed.0;
        if bytes.len() < HEADER_LEN || bytes[0] != FORMAT_VERSION {
            return Err(UnsealError("unknown format".into()));
        }
        if bytes[1..=KEY_ID_LEN] != self.key_id {
            return Err(UnsealError(
                "sealed under another MAILROOM_SECRET_KEY".into(),
            ));
        }
        let nonce = XNonce::from_slice(&bytes[1 + KEY_ID_LEN..HEADER_LEN]);
        let aad = Self::associated_data(slot);
        let plaintext = self
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
        // The purpose ends at a NUL, so ("ab", "c…") and ("a", "bc…") never collide.
        hmac_sha256(&self.link_key, &[purpose.as_bytes(), &[0], message])
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
}
