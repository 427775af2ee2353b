use mailroom_domain::{
    paging::PageRequest,
    secret::SecretString,
    sending_domain::{DkimSelector, DomainName, SendingDomain},
    AccountId, DkimKeyId, SendingDomainId,
};

use super::SealedSecret;
use crate::StoreError;

/// The key a verified domain signs with, as a claim batch reads it.
#[derive(Debug, Clone)]
pub struct SigningKeyRecord {
    /// The account.
    pub account: AccountId,
    /// The verified domain (the DKIM `d=`).
    pub domain: DomainName,
    /// The key's id (its sealed slot).
    pub key_id: DkimKeyId,
    /// The selector (the DKIM `s=`).
    pub selector: String,
    /// The sealed private key.
    pub private_key: SealedSecret,
    /// Whether the domain's return-path record (`bounces.<domain>`) is verified, so its
    /// mail carries a VERP envelope sender.
    pub return_path: bool,
}

/// Sending domains and their DKIM keys.
pub trait SendingDomainRepository {
    /// One page of the account's domains, oldest first, each with its keys.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn list_sending_domains(
        &mut self,
        account: AccountId,
        page: PageRequest,
    ) -> Result<Vec<SendingDomain>, StoreError>;

    /// How many domains the account holds.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn count_sending_domains(&mut self, account: AccountId) -> Result<u64, StoreError>;

    /// The domain with its keys, if it is the account's; `lock` holds its row until the
    /// transaction ends (rotations and removals of one domain run one at a time).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_sending_domain(
        &mut self,
        account: AccountId,
        id: SendingDomainId,
        lock: bool,
    ) -> Result<Option<SendingDomain>, StoreError>;

    /// Stores a new domain (without keys: see [`SendingDomainRepository::insert_dkim_key`]).
    ///
    /// # Errors
    /// [`StoreError::Duplicate`] ([`Duplicate::SendingDomainName`](crate::Duplicate)) when the
    /// account already holds the name.
    fn insert_sending_domain(
        &mut self,
        account: AccountId,
        domain: &SendingDomain,
    ) -> Result<(), StoreError>;

    /// Stores a key of the domain with its sealed private key.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn insert_dkim_key(
        &mut self,
        account: AccountId,
        domain: SendingDomainId,
        key: &DkimSelector,
        private_key: &SealedSecret,
    ) -> Result<(), StoreError>;

    /// Writes the outcome of a check: the domain's statuses and times and each key's
    /// status. `false` when the domain is gone.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn record_domain_check(
        &mut self,
        account: AccountId,
        domain: &SendingDomain,
    ) -> Result<bool, StoreError>;

    /// Deletes the domain and its keys; `false` when there was none.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn delete_sending_domain(
        &mut self,
        account: AccountId,
        id: SendingDomainId,
    ) -> Result<bool, StoreError>;

    /// Deletes one key of the domain; `false` when there was none.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn delete_dkim_key(
        &mut self,
        account: AccountId,
        domain: SendingDomainId,
        key: DkimKeyId,
    ) -> Result<bool, StoreError>;

    /// The names of the account's verified domains.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn verified_domain_names(&mut self, account: AccountId) -> Result<Vec<DomainName>, StoreError>;

    /// The accounts holding a sending domain named `name` whose return-path record is
    /// verified (at most `limit`, in id order). Across accounts: the one lookup the
    /// inbound SMTP listener makes before it knows the account, by the `RCPT TO` domain.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn return_path_accounts(
        &mut self,
        name: &DomainName,
        limit: u32,
    ) -> Result<Vec<AccountId>, StoreError>;

    /// The signing (newest) key of every verified domain of `accounts`.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn signing_keys(&mut self, accounts: &[AccountId])
        -> Result<Vec<SigningKeyRecord>, StoreError>;
}

/// A new DKIM key pair.
#[derive(Debug, Clone)]
pub struct DkimKeyPair {
    /// The private key, PKCS#1 PEM (sealed before storage).
    pub private_key_pem: SecretString,
    /// The public key, base64 of its DER `SubjectPublicKeyInfo` (DKIM's `p=`).
    pub public_key: String,
}

/// Makes DKIM keys (2048-bit RSA). Slow (up to a second or so): never call it inside a
/// transaction.
pub trait DkimKeyGenerator: Send + Sync {
    /// A fresh key pair.
    ///
    /// # Errors
    /// A description when the generator fails.
    fn generate(&self) -> Result<DkimKeyPair, String>;
}

/// The DNS lookups of a domain check, through the operator's resolver
/// (`MAILROOM_DNS_SERVER`), each bounded in time and answer size. Blocking: used only
/// between transactions.
pub trait DomainDns: Send + Sync {
    /// The TXT records at `name`, each record's strings joined. Empty when there is none.
    ///
    /// # Errors
    /// A description when the lookup failed or timed out.
    fn txt(&self, name: &str) -> Result<Vec<String>, String>;

    /// The MX exchanges at `name`. Empty when there is none.
    ///
    /// # Errors
    /// A description when the lookup failed or timed out.
    fn mx(&self, name: &str) -> Result<Vec<String>, String>;
}
