use mailroom_domain::{secret::SecretString, Timestamp, Uuid};

/// The current time. Tests substitute a clock they can move.
pub trait Clock: Send + Sync {
    /// Now, in UTC, to the millisecond.
    fn now(&self) -> Timestamp;
}

/// New record ids (UUIDv7: time-ordered, so inserts stay at the right edge of indexes).
pub trait Ids: Send + Sync {
    /// A fresh id.
    fn next_uuid(&self) -> Uuid;
}

/// Encrypted secret bytes as stored: a key id, a nonce and the ciphertext with its tag.
#[derive(Clone, PartialEq, Eq)]
pub struct SealedSecret(pub Vec<u8>);

impl std::fmt::Debug for SealedSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SealedSecret({} bytes)", self.0.len())
    }
}

/// Where a sealed secret lives. It is bound into the encryption as associated data, so a
/// ciphertext copied to another row or column no longer opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretSlot {
    /// The table.
    pub table: &'static str,
    /// The column.
    pub column: &'static str,
    /// The row's key (for account-owned rows, the account id and the record id).
    pub row: String,
}

/// A sealed secret did not open: wrong key, or moved to another slot, or tampered with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("stored secret cannot be decrypted: {0}")]
pub struct UnsealError(pub String);

/// Secret material: randomness for credentials and encryption of stored secrets.
pub trait Secrets: Send + Sync {
    /// Fills `buf` from the operating system's random source.
    fn fill_random(&self, buf: &mut [u8]);

    /// Encrypts `plaintext` for `slot`.
    fn seal(&self, plaintext: &SecretString, slot: &SecretSlot) -> SealedSecret;

    /// Decrypts what [`Secrets::seal`] produced for the same slot.
    ///
    /// # Errors
    /// [`UnsealError`] when it does not open.
    fn open(&self, sealed: &SealedSecret, slot: &SecretSlot) -> Result<SecretString, UnsealError>;

    /// HMAC-SHA256 of `message` under a key derived from the secret key for link signing
    /// (tracking and unsubscribe tokens), with `purpose` bound in, so a tag made for one
    /// purpose never verifies for another. Pure computation; the same inputs always give
    /// the same tag under the same secret key.
    fn sign(&self, purpose: &str, message: &[u8]) -> [u8; 32];

    /// [`Secrets::sign`] under the previous secret key during a key rotation, so links
    /// mailed before it still verify; `None` when there is no previous key.
    fn sign_with_previous(&self, _purpose: &str, _message: &[u8]) -> Option<[u8; 32]> {
        None
    }

    /// Whether `sealed` was sealed under the current key, so key rotation can leave it
    /// as it is. The default (`false`) makes rotation re-seal everything, which is
    /// always correct, only slower.
    fn sealed_under_current_key(&self, _sealed: &SealedSecret) -> bool {
        false
    }
}
