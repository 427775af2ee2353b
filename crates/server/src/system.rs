//! The system adapters of the small ports: wall clock, UUIDv7 ids, and secrets sealed with
//! XChaCha20-Poly1305.

use chacha20poly1305::{
    aead::{Aead, AeadCore, KeyInit, Payload},
    XChaCha20Poly1305, XNonce,
};
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
}
