//! What the messages of one claim share, read once per claim instead of once per message:
//! the contacts, their attributes and their addresses' entries on the suppression list
//! (with the topic unsubscriptions an address's deleted contact left, given back to the
//! live one) in one query each per account, and each template,
//! chosen mail server (with its opened password) and account the first time a message
//! needs it. `prepare` asks this cache where it would ask the store; anything not
//! preloaded falls back to the store, so a cache miss is slower, never wrong.
//!
//! Everything is read in the claim's transaction, so the cache sees what a per-message
//! read would have seen.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use mailroom_domain::{
    announcement::Announcement, attribute::ResolvedAttributes, automation::Automation,
    contact::Contact, message::Message, suppression::SuppressionReason, AccountId, AnnouncementId,
    AutomationId, ContactId, MailServerId, TemplateId, UserId,
};

use crate::{
    contacts::{resolve_attributes, resolve_contact_attributes},
    domains::dkim_key_slot,
    mail_servers::{connection_security, password_slot},
    ports::{AccountRecord, DkimSigning, MailServerRecord, SavedServer, SmtpEndpoint, UnitOfWork},
    rendering::TemplateFields,
    suppressions::apply_list,
    AppError, Services,
};

/// A template as the claim's messages use it: its fields shared (not copied per message)
/// and their digest, computed once per claim, under which render children keep it
/// compiled.
#[derive(Clone)]
pub(super) struct ClaimedTemplate {
    pub(super) preferred_mail_server: Option<MailServerId>,
    pub(super) fields: Arc<TemplateFields>,
    pub(super) digest: Arc<str>,
}

/// The claim's shared reads.
#[derive(Default)]
pub(super) struct ClaimBatch {
    contacts: HashMap<(AccountId, ContactId), Contact>,
    /// The reasons each preloaded contact's address is on the suppression list for.
    listed: HashMap<(AccountId, ContactId), Vec<SuppressionReason>>,
    attributes: HashMap<(AccountId, ContactId), ResolvedAttributes>,
    templates: HashMap<(AccountId, TemplateId), Option<ClaimedTemplate>>,
    servers: HashMap<(AccountId, Option<MailServerId>), Option<MailServerRecord>>,
    accounts: HashMap<AccountId, Option<AccountRecord>>,
    endpoints: HashMap<(AccountId, MailServerId), Result<SmtpEndpoint, String>>,
    automations: HashMap<(AccountId, AutomationId), Option<Automation>>,
    announcements: HashMap<(AccountId, AnnouncementId), Option<Announcement>>,
    signing_keys: HashMap<AccountId, Arc<[DkimSigning]>>,
    owners: HashMap<AccountId, Option<UserId>>,
}

impl ClaimBatch {
    /// Loads the contacts of `messages` and their resolved attributes: one query each per
    /// account in the batch.
    pub(super) fn load(
        tx: &mut dyn UnitOfWork,
        services: &Services,
        messages: &[Message],
    ) -> Result<Self, AppError> {
        let mut by_account: HashMap<AccountId, Vec<&Message>> = HashMap::new();
        for message in messages {
            by_account
                .entry(message.account_id)
                .or_default()
                .push(message);
        }
        let mut batch = Self::default();
        let accounts: Vec<AccountId> = by_account.keys().copied().collect();
        batch.signing_keys = open_signing_keys(tx, services, &accounts)?;
        for (account, claimed) in by_account {
            let mut ids: Vec<ContactId> =
                claimed.iter().map(|message| message.contact_id).collect();
            ids.sort_unstable();
            ids.dedup();
            let mut contacts = tx.find_contacts(account, &ids)?;
            let unstored = test_addressees(&claimed, &contacts);
            for (id, reasons) in apply_list(tx, services, account, &mut contacts, &unstored)? {
                batch.listed.insert((account, id), reasons);
            }
            for (id, attributes) in resolve_attributes(tx, account, &contacts)? {
                batch.attributes.insert((account, id), attributes);
            }
            for contact in contacts.into_iter().chain(unstored) {
                batch.contacts.insert((account, contact.id), contact);
            }
        }
        Ok(batch)
    }

    /// The reasons the address of a contact the claim preloaded is on the suppression
    /// list for (a contact read later, one deleted meanwhile, is never sent to).
    pub(super) fn listed(&self, account: AccountId, id: ContactId) -> &[SuppressionReason] {
        self.listed
            .get(&(account, id))
            .map_or(&[][..], Vec::as_slice)
    }

    /// The contact; `None` when it was deleted.
    pub(super) fn contact(
        &mut self,
        tx: &mut dyn UnitOfWork,
        account: AccountId,
        id: ContactId,
    ) -> Result<Option<Contact>, AppError> {
        if let Some(contact) = self.contacts.get(&(account, id)) {
            return Ok(Some(contact.clone()));
        }
        Ok(tx.find_contact(account, id)?)
    }

    /// The contact's resolved attributes (empty when it has none).
    pub(super) fn attributes(
        &mut self,
        tx: &mut dyn UnitOfWork,
        account: AccountId,
        id: ContactId,
    ) -> Result<ResolvedAttributes, AppError> {
        if let Some(attributes) = self.attributes.get(&(account, id)) {
            return Ok(attributes.clone());
        }
        match self.contact(tx, account, id)? {
            Some(contact) => Ok(resolve_contact_attributes(tx, account, &contact)?),
            // Deleted: no attributes.
            None => Ok(ResolvedAttributes::new()),
        }
    }

    /// The template; `None` when it was deleted.
    /// The automation that queued a message, read once per claim.
    pub(super) fn automation(
        &mut self,
        tx: &mut dyn UnitOfWork,
        account: AccountId,
        id: AutomationId,
    ) -> Result<Option<Automation>, AppError> {
        if let Some(automation) = self.automations.get(&(account, id)) {
            return Ok(automation.clone());
        }
        let automation = tx.find_automation(account, id)?;
        self.automations.insert((account, id), automation.clone());
        Ok(automation)
    }

    /// The announcement that queued a message, read once per claim (a claim of an
    /// announcement's messages is mostly one announcement).
    pub(super) fn announcement(
        &mut self,
        tx: &mut dyn UnitOfWork,
        account: AccountId,
        id: AnnouncementId,
    ) -> Result<Option<Announcement>, AppError> {
        if let Some(announcement) = self.announcements.get(&(account, id)) {
            return Ok(announcement.clone());
        }
        let announcement = tx.find_announcement(account, id)?;
        self.announcements
            .insert((account, id), announcement.clone());
        Ok(announcement)
    }

    pub(super) fn template(
        &mut self,
        tx: &mut dyn UnitOfWork,
        account: AccountId,
        id: TemplateId,
    ) -> Result<Option<ClaimedTemplate>, AppError> {
        if let Some(template) = self.templates.get(&(account, id)) {
            return Ok(template.clone());
        }
        let template = tx.find_template(account, id)?.map(|template| {
            let fields = TemplateFields::of(&template);
            ClaimedTemplate {
                preferred_mail_server: template.preferred_mail_server,
                digest: Arc::from(fields.digest()),
                fields: Arc::new(fields),
            }
        });
        self.templates.insert((account, id), template.clone());
        Ok(template)
    }

    /// The server a message of this template goes through (see `choose_server`).
    pub(super) fn server(
        &mut self,
        tx: &mut dyn UnitOfWork,
        account: AccountId,
        preferred: Option<MailServerId>,
    ) -> Result<Option<MailServerRecord>, AppError> {
        if let Some(server) = self.servers.get(&(account, preferred)) {
            return Ok(server.clone());
        }
        let server = choose_server(tx, account, preferred)?;
        self.servers.insert((account, preferred), server.clone());
        Ok(server)
    }

    /// The account's owner (whose monthly allowance its messages spend), read once per
    /// claim; an account's owner never changes.
    pub(super) fn owner(
        &mut self,
        tx: &mut dyn UnitOfWork,
        account: AccountId,
    ) -> Result<Option<UserId>, AppError> {
        if let Some(owner) = self.owners.get(&account) {
            return Ok(*owner);
        }
        let owner = tx.account_owner(account)?;
        self.owners.insert(account, owner);
        Ok(owner)
    }

    /// The account's record; `None` when it is gone.
    pub(super) fn account(
        &mut self,
        tx: &mut dyn UnitOfWork,
        account: AccountId,
    ) -> Result<Option<AccountRecord>, AppError> {
        if let Some(record) = self.accounts.get(&account) {
            return Ok(record.clone());
        }
        let record = tx.find_account(account)?;
        self.accounts.insert(account, record.clone());
        Ok(record)
    }

    /// The DKIM keys of the account's verified domains, opened once per claim.
    pub(super) fn signing_keys(&self, account: AccountId) -> Arc<[DkimSigning]> {
        self.signing_keys
            .get(&account)
            .cloned()
            .unwrap_or_else(|| Arc::from(Vec::new()))
    }

    /// The server's endpoint with its password opened once per claim (opening is a
    /// decryption).
    pub(super) fn endpoint(
        &mut self,
        services: &Services,
        account: &AccountRecord,
        record: &MailServerRecord,
    ) -> Result<SmtpEndpoint, String> {
        self.endpoints
            .entry((account.id, record.server.id))
            .or_insert_with(|| endpoint(services, account, record))
            .clone()
    }
}

/// The signing key of every verified domain of `accounts`, opened (one decryption each).
/// A key that no longer opens is left out, so its mail goes unsigned rather than not at
/// all, and a warning says so.
fn open_signing_keys(
    tx: &mut dyn UnitOfWork,
    services: &Services,
    accounts: &[AccountId],
) -> Result<HashMap<AccountId, Arc<[DkimSigning]>>, AppError> {
    let mut opened: HashMap<AccountId, Vec<DkimSigning>> = HashMap::new();
    for record in tx.signing_keys(accounts)? {
        match services.secrets.open(
            &record.private_key,
            &dkim_key_slot(record.account, record.key_id),
        ) {
            Ok(private_key_pem) => opened.entry(record.account).or_default().push(DkimSigning {
                domain: record.domain,
                selector: record.selector,
                private_key_pem,
                return_path: record.return_path,
            }),
            Err(_) => tracing::warn!(
                account = %record.account,
                domain = record.domain.as_str(),
                "the stored DKIM key cannot be opened: mail from this domain goes unsigned"
            ),
        }
    }
    Ok(opened
        .into_iter()
        .map(|(account, keys)| (account, Arc::from(keys)))
        .collect())
}

/// The template's preferred server, else the account's oldest: the one place this rule
/// lives.
pub(crate) fn choose_server(
    tx: &mut dyn UnitOfWork,
    account: AccountId,
    preferred: Option<MailServerId>,
) -> Result<Option<MailServerRecord>, AppError> {
    if let Some(id) = preferred {
        if let Some(record) = tx.find_mail_server(account, id)? {
            return Ok(Some(record));
        }
    }
    let first = mailroom_domain::paging::PageRequest { start: 0, limit: 1 };
    Ok(tx.list_mail_servers(account, first)?.into_iter().next())
}

fn endpoint(
    services: &Services,
    account_record: &AccountRecord,
    record: &MailServerRecord,
) -> Result<SmtpEndpoint, String> {
    let account = account_record.id;
    let server = &record.server;
    let password = services
        .secrets
        .open(&record.password, &password_slot(account, server.id))
        .map_err(|_| "the mail server's stored password cannot be opened".to_owned())?;
    let security = connection_security(
        server.secure,
        server.require_tls,
        !server.user.is_empty(),
        account_record.refuse_clear_text_auth,
    );
    Ok(SmtpEndpoint {
        host: server.host.as_str().to_owned(),
        port: server.port,
        security,
        allow_insecure_tls: server.allow_insecure_tls,
        user: server.user.clone(),
        password,
        saved: Some(SavedServer {
            account_id: account,
            id: server.id,
            updated_at: server.updated_at,
        }),
    })
}

/// Stand-ins for the addresses of test sends whose contact id no contact has (a test
/// makes no contact): the message's own address, no marks, no attributes. The claim
/// checks them against the list like any address and writes nothing for them.
fn test_addressees(messages: &[&Message], stored: &[Contact]) -> Vec<Contact> {
    // Most claims hold no test: they pay one pass over the messages, nothing more.
    if !messages.iter().any(|message| message.test) {
        return Vec::new();
    }
    let mut known: HashSet<ContactId> = stored.iter().map(|contact| contact.id).collect();
    let mut addressees: Vec<Contact> = Vec::new();
    for message in messages {
        if message.test && known.insert(message.contact_id) {
            addressees.push(Contact {
                id: message.contact_id,
                email: message.email.clone(),
                created_at: message.created_at,
                hard_bounced_at: None,
                complaint_at: None,
                unsubscribed_at: None,
                topic_unsubscriptions: Vec::new(),
                message_count: 0,
                pending_since: None,
                confirmed_at: None,
            });
        }
    }
    addressees
}
