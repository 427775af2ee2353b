//! The suppression list: addresses an account must not mail, kept apart from the contacts
//! so that deleting (or erasing) a contact does not forget that its address bounced,
//! complained or unsubscribed (docs/api-decisions.md, "Suppression list").
//!
//! Every mark a contact gets (hard bounce, complaint, unsubscription from everything)
//! lists its address in the same transaction ([`suppress`]); the claim reads the entries
//! of a batch's addresses in one statement per account and adds them to the contacts'
//! own marks, so a contact made again for a listed address is skipped as its predecessor
//! was. An entry names the address by HMAC-SHA256 under the account's own random key,
//! sealed like every stored secret, so an erased person's address is not kept in clear.

mod import;
mod manage;

pub use import::{import_suppressions, SuppressionImportSummary};
pub use manage::{
    add_suppression, count_suppressions, export_csv, export_page, list_suppressions,
    remove_suppressions, suppressions_of, NewSuppression, EXPORT_PAGE,
};

use std::collections::HashMap;

use hmac::{Hmac, Mac};
use mailroom_domain::{
    contact::Contact,
    email::normalize_email,
    secret::SecretString,
    suppression::{
        suppression_detail, AddressHash, SuppressionEntry, SuppressionReason, SuppressionSource,
    },
    AccountId, ContactId, Timestamp,
};
use sha2::Sha256;

use crate::{
    ports::{SealedSecret, SecretSlot, UnitOfWork},
    ttl_cache::TtlCache,
    AppError, Services,
};

/// How long a process trusts an account's opened key. The key never changes (a rotation
/// of `MAILROOM_SECRET_KEY` seals the same key again), so this only bounds memory churn.
const KEY_CACHE_TTL: time::Duration = time::Duration::hours(1);

/// Most opened keys a process holds.
const KEY_CACHE_CAPACITY: usize = 10_000;

/// Opened address keys by account, shared by the process's requests and workers.
pub struct SuppressionKeyCache(TtlCache<AccountId, AddressKey>);

impl Default for SuppressionKeyCache {
    fn default() -> Self {
        Self(TtlCache::new(KEY_CACHE_TTL, KEY_CACHE_CAPACITY))
    }
}

impl std::fmt::Debug for SuppressionKeyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SuppressionKeyCache")
            .field(&self.0.len())
            .finish()
    }
}

/// An account's key for address hashes.
#[derive(Clone)]
pub struct AddressKey([u8; 32]);

impl AddressKey {
    /// The hash that names `email` (as written; it is normalised here) on the list.
    pub fn hash(&self, email: &str) -> AddressHash {
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(normalize_email(email).as_bytes());
        AddressHash(mac.finalize().into_bytes().into())
    }
}

/// Where an account's address key is sealed.
pub(crate) fn key_slot(account: AccountId) -> SecretSlot {
    SecretSlot {
        table: "suppression_keys",
        column: "sealed_key",
        row: account.to_string(),
    }
}

fn open_key(
    services: &Services,
    account: AccountId,
    sealed: &SealedSecret,
) -> Result<AddressKey, AppError> {
    let opened = services
        .secrets
        .open(sealed, &key_slot(account))
        .map_err(|error| AppError::Internal(format!("the suppression key: {error}")))?;
    let mut key = [0u8; 32];
    hex::decode_to_slice(opened.expose(), &mut key)
        .map_err(|_| AppError::Internal("the suppression key is not 32 bytes of hex".into()))?;
    Ok(AddressKey(key))
}

/// The account's key, when it has one: an account without one has no entries.
pub(crate) fn existing_key(
    tx: &mut dyn UnitOfWork,
    services: &Services,
    account: AccountId,
) -> Result<Option<AddressKey>, AppError> {
    let now = services.clock.now();
    if let Some(key) = services.suppression_keys.0.get(&account, now) {
        return Ok(Some(key));
    }
    let Some(sealed) = tx.suppression_key(account)? else {
        return Ok(None);
    };
    let key = open_key(services, account, &sealed)?;
    services.suppression_keys.0.put(account, key.clone(), now);
    Ok(Some(key))
}

/// The account's key, made and stored on first use.
pub(crate) fn account_key(
    tx: &mut dyn UnitOfWork,
    services: &Services,
    account: AccountId,
) -> Result<AddressKey, AppError> {
    if let Some(key) = existing_key(tx, services, account)? {
        return Ok(key);
    }
    let mut key = [0u8; 32];
    services.secrets.fill_random(&mut key);
    let sealed = services
        .secrets
        .seal(&SecretString::new(hex::encode(key)), &key_slot(account));
    if tx.insert_suppression_key(account, &sealed, services.clock.now())? {
        return Ok(AddressKey(key));
    }
    // Another transaction made one first: that one is the account's.
    existing_key(tx, services, account)?
        .ok_or_else(|| AppError::Internal("the suppression key vanished".into()))
}

/// What a new entry says: the address as written, why, what listed it, what the source
/// said, and when.
pub(crate) struct Listing<'a> {
    pub(crate) email: &'a str,
    pub(crate) reason: SuppressionReason,
    pub(crate) source: SuppressionSource,
    pub(crate) detail: Option<&'a str>,
    pub(crate) at: Timestamp,
}

/// Lists an address for a reason (unless it is listed for it already), in the caller's
/// transaction.
pub(crate) fn suppress(
    tx: &mut dyn UnitOfWork,
    services: &Services,
    account: AccountId,
    listing: &Listing<'_>,
) -> Result<(), AppError> {
    let key = account_key(tx, services, account)?;
    let entry = SuppressionEntry {
        address_hash: key.hash(listing.email),
        reason: listing.reason,
        source: listing.source,
        email: Some(listing.email.to_owned()),
        detail: listing.detail.map(suppression_detail),
        created_at: listing.at,
    };
    tx.add_suppressions(account, std::slice::from_ref(&entry))?;
    Ok(())
}

/// What the list says of a claim's contacts of one account, by contact: the reasons each
/// one's address is listed for. `stored` are contacts of the store; `unstored` stand for
/// the addresses of test sends that have none (they are checked, and nothing is written
/// for them). A stored contact whose address's earlier contact was deleted with topic
/// unsubscriptions gets them back here: they are written to it (in the caller's
/// transaction), added to its `topic_unsubscriptions`, and no longer kept by hash. Two
/// statements for the set, none for an account without a key (it has no entries), and
/// the restore only when there is something to give back.
pub(crate) fn apply_list(
    tx: &mut dyn UnitOfWork,
    services: &Services,
    account: AccountId,
    stored: &mut [Contact],
    unstored: &[Contact],
) -> Result<HashMap<ContactId, Vec<SuppressionReason>>, AppError> {
    let Some(key) = existing_key(tx, services, account)? else {
        return Ok(HashMap::new());
    };
    if stored.is_empty() && unstored.is_empty() {
        return Ok(HashMap::new());
    }
    // The contacts of each hash: an unstored address may be a stored one's too.
    let mut by_hash: HashMap<AddressHash, Vec<ContactId>> = HashMap::new();
    let mut stored_at: HashMap<AddressHash, usize> = HashMap::with_capacity(stored.len());
    for (position, contact) in stored.iter().enumerate() {
        let hash = key.hash(&contact.email);
        by_hash.entry(hash).or_default().push(contact.id);
        stored_at.insert(hash, position);
    }
    for contact in unstored {
        by_hash
            .entry(key.hash(&contact.email))
            .or_default()
            .push(contact.id);
    }
    let hashes: Vec<AddressHash> = by_hash.keys().copied().collect();
    let mut listed: HashMap<ContactId, Vec<SuppressionReason>> = HashMap::new();
    for (hash, reason) in tx.suppression_reasons(account, &hashes)? {
        for id in by_hash.get(&hash).into_iter().flatten() {
            listed.entry(*id).or_default().push(reason);
        }
    }
    let stored_hashes: Vec<AddressHash> = stored_at.keys().copied().collect();
    let kept = tx.kept_topic_unsubscriptions(account, &stored_hashes)?;
    if !kept.is_empty() {
        let mut restored = Vec::with_capacity(kept.len());
        let mut restored_hashes = Vec::new();
        for (hash, topic, at) in kept {
            if let Some(&position) = stored_at.get(&hash) {
                let contact = &mut stored[position];
                if !contact.topic_unsubscriptions.contains(&topic) {
                    contact.topic_unsubscriptions.push(topic);
                }
                restored.push((contact.id, topic, at));
                restored_hashes.push(hash);
            }
        }
        restored_hashes.sort_unstable_by_key(|hash| hash.0);
        restored_hashes.dedup();
        tx.restore_topic_unsubscriptions(account, &restored, &restored_hashes)?;
    }
    Ok(listed)
}

/// Keeps the topic unsubscriptions of a contact about to be deleted under its address's
/// hash (making the account's key if it has none), so that a contact made again for the
/// address does not get the topics it had left.
pub(crate) fn keep_topic_unsubscriptions(
    tx: &mut dyn UnitOfWork,
    services: &Services,
    account: AccountId,
    contact: &Contact,
) -> Result<(), AppError> {
    if contact.topic_unsubscriptions.is_empty() {
        return Ok(());
    }
    let key = account_key(tx, services, account)?;
    tx.keep_topic_unsubscriptions(account, contact.id, key.hash(&contact.email))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::AddressKey;

    #[test]
    fn the_hash_is_hmac_sha256_of_the_lower_cased_address() {
        // RFC 4231 test case 2: key "Jefe" (padded here with zeros to 32 bytes, which
        // HMAC treats the same as the short key), data "what do ya want for nothing?".
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(b"Jefe");
        let hash = AddressKey(key).hash("WHAT do ya want for nothing?");
        assert_eq!(
            hash.to_string(),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            AddressKey(key).hash("Ann@Example.com"),
            AddressKey(key).hash("ann@example.com")
        );
        assert_ne!(
            AddressKey([1; 32]).hash("ann@example.com"),
            AddressKey(key).hash("ann@example.com")
        );
    }
}
