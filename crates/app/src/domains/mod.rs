//! Sending domains: create (with a DKIM key made outside any transaction), list, count,
//! get, verify through DNS, rotate the key, remove an old selector, delete; and the
//! sender rule the templates and mail servers follow once a domain is verified
//! (docs/operations.md#sending-domains).

mod count_domains;
mod create_domain;
mod delete_domain;
mod get_domain;
mod list_domains;
mod remove_selector;
mod rotate_domain_key;
mod sender_rule;
mod verify_domain;

pub use count_domains::count_domains;
pub use create_domain::create_domain;
pub use delete_domain::delete_domain;
pub use get_domain::get_domain;
pub use list_domains::list_domains;
pub use remove_selector::remove_selector;
pub use rotate_domain_key::rotate_domain_key;
pub(crate) use sender_rule::check_sender;
pub use verify_domain::verify_domain;

use mailroom_domain::{
    sending_domain::{selector_name, CheckStatus, DkimSelector, DnsRecord, SendingDomain},
    AccountId, DkimKeyId,
};

use crate::{
    ports::{SealedSecret, SecretSlot},
    AppError, Services,
};

/// A domain with the records its owner publishes.
#[derive(Debug, Clone)]
pub struct DomainView {
    /// The domain.
    pub domain: SendingDomain,
    /// What to publish, each with its status at the latest check.
    pub records: Vec<DnsRecord>,
}

impl DomainView {
    pub(crate) fn new(services: &Services, domain: SendingDomain) -> Self {
        let records = domain.records(services.inbound_host.as_deref());
        Self { domain, records }
    }
}

/// Where a DKIM private key is sealed.
pub(crate) fn dkim_key_slot(account: AccountId, key: DkimKeyId) -> SecretSlot {
    SecretSlot {
        table: "sending_domain_keys",
        column: "private_key",
        row: format!("{account}/{key}"),
    }
}

/// A fresh key with its selector, sealed for its slot. Slow: call it between
/// transactions only.
pub(crate) fn new_key(
    services: &Services,
    account: AccountId,
) -> Result<(DkimSelector, SealedSecret), AppError> {
    let pair = services
        .dkim_keys
        .generate()
        .map_err(|error| AppError::Internal(format!("making a DKIM key: {error}")))?;
    let id = DkimKeyId::from_uuid(services.ids.next_uuid());
    let mut random = [0u8; 2];
    services.secrets.fill_random(&mut random);
    let now = services.clock.now();
    let sealed = services
        .secrets
        .seal(&pair.private_key_pem, &dkim_key_slot(account, id));
    Ok((
        DkimSelector {
            id,
            selector: selector_name(now, random),
            public_key: pair.public_key,
            status: CheckStatus::Pending,
            created_at: now,
        },
        sealed,
    ))
}
