//! The list as the API and the console see it.

use mailroom_domain::{
    email::EmailAddress,
    paging::PageRequest,
    suppression::{AddressHash, SuppressionEntry, SuppressionReason, SuppressionSource},
};

use super::{account_key, existing_key, suppress, Listing};
use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// One page of the account's list, newest first, of one reason or all.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn list_suppressions(
    services: &Services,
    member: &Member,
    reason: Option<SuppressionReason>,
    page: PageRequest,
) -> Result<Vec<SuppressionEntry>, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.list_suppressions(account, reason, page)?)
    })
}

/// How many entries the account's list holds, of one reason or all.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn count_suppressions(
    services: &Services,
    member: &Member,
    reason: Option<SuppressionReason>,
) -> Result<u64, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.count_suppressions(account, reason)?)
    })
}

/// Entries an export writes per page: one short transaction each.
pub const EXPORT_PAGE: u32 = 1_000;

/// The export's next page: up to [`EXPORT_PAGE`] entries after `after` in key order
/// (empty at the end).
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn export_page(
    services: &Services,
    member: &Member,
    after: Option<(AddressHash, SuppressionReason)>,
) -> Result<Vec<SuppressionEntry>, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.suppressions_after(account, after, EXPORT_PAGE)?)
    })
}

/// The columns of the export, in order.
pub const EXPORT_COLUMNS: [&str; 6] = [
    "email",
    "address_hash",
    "reason",
    "source",
    "detail",
    "created_at",
];

/// `entries` as CSV rows (after a header row when `header`), in the export's columns;
/// an erased address is an empty `email`.
pub fn export_csv(entries: &[SuppressionEntry], header: bool) -> Result<Vec<u8>, AppError> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    let failed = |error: csv::Error| AppError::Internal(format!("the export's CSV: {error}"));
    if header {
        writer.write_record(EXPORT_COLUMNS).map_err(failed)?;
    }
    for entry in entries {
        writer
            .write_record([
                entry.email.as_deref().unwrap_or_default(),
                &entry.address_hash.to_string(),
                entry.reason.as_str(),
                entry.source.as_str(),
                entry.detail.as_deref().unwrap_or_default(),
                &entry.created_at.to_string(),
            ])
            .map_err(failed)?;
    }
    writer
        .into_inner()
        .map_err(|error| AppError::Internal(format!("the export's CSV: {error}")))
}

/// The entries of one address, in reason order (none when it is not listed).
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn suppressions_of(
    services: &Services,
    member: &Member,
    email: &EmailAddress,
) -> Result<Vec<SuppressionEntry>, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        let Some(key) = existing_key(tx, services, account)? else {
            return Ok(Vec::new());
        };
        Ok(tx.find_suppressions(account, key.hash(email.as_str()))?)
    })
}

/// An address the account lists by hand.
#[derive(Debug, Clone)]
pub struct NewSuppression {
    /// The address.
    pub email: EmailAddress,
    /// Why, in the account's words (kept as the entry's detail).
    pub detail: Option<String>,
    /// The API or the console.
    pub source: SuppressionSource,
}

/// Lists an address by hand (`manual`): nothing is sent to it, transactional mail
/// included, until it is removed. Listing it again changes nothing. Returns the
/// address's entries.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn add_suppression(
    services: &Services,
    member: &Member,
    input: &NewSuppression,
) -> Result<Vec<SuppressionEntry>, AppError> {
    let account = member.account();
    let now = services.clock.now();
    in_transaction(services.db.as_ref(), |tx| {
        suppress(
            tx,
            services,
            account,
            &Listing {
                email: input.email.as_str(),
                reason: SuppressionReason::Manual,
                source: input.source,
                detail: input.detail.as_deref(),
                at: now,
            },
        )?;
        let key = account_key(tx, services, account)?;
        Ok(tx.find_suppressions(account, key.hash(input.email.as_str()))?)
    })
}

/// Takes an address off the list, for `reason` or for every reason, and clears the
/// same marks on the account's contact of that address, so it can be mailed again (a
/// person who re-confirmed, a bounce that was the receiver's fault). Returns the removed
/// entries.
///
/// # Errors
/// [`AppError::NotFound`] when the address is not listed (for that reason).
pub fn remove_suppressions(
    services: &Services,
    member: &Member,
    email: &EmailAddress,
    reason: Option<SuppressionReason>,
) -> Result<Vec<SuppressionEntry>, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        let Some(key) = existing_key(tx, services, account)? else {
            return Err(AppError::NotFound);
        };
        let reasons = match reason {
            Some(reason) => vec![reason],
            None => SuppressionReason::ALL.to_vec(),
        };
        let removed = tx.remove_suppressions(account, key.hash(email.as_str()), &reasons)?;
        if removed.is_empty() {
            return Err(AppError::NotFound);
        }
        let cleared: Vec<SuppressionReason> = removed.iter().map(|entry| entry.reason).collect();
        tx.clear_contact_marks(account, &email.normalized(), &cleared)?;
        Ok(removed)
    })
}
