use mailroom_domain::{
    attribute::{AttributeMeta, AttributeSource, SYSTEM_ATTRIBUTES},
    paging::PageRequest,
    AccountId,
};

use crate::{auth::Member, ports::in_transaction, ports::UnitOfWork, AppError, Services};

/// System attributes first, then custom and event attributes by slug.
fn all_metas(tx: &mut dyn UnitOfWork, account: AccountId) -> Result<Vec<AttributeMeta>, AppError> {
    let mut metas: Vec<AttributeMeta> = SYSTEM_ATTRIBUTES
        .iter()
        .map(|(slug, attribute_type)| AttributeMeta {
            slug: (*slug).to_owned(),
            attribute_type: *attribute_type,
            source: AttributeSource::System,
        })
        .collect();
    metas.extend(tx.list_attribute_metas(account)?);
    Ok(metas)
}

/// One page of the account's attribute metas.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn list_attribute_metas(
    services: &Services,
    member: &Member,
    page: PageRequest,
) -> Result<Vec<AttributeMeta>, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        let metas = all_metas(tx, account)?;
        let start = usize::try_from(page.start).unwrap_or(usize::MAX);
        Ok(metas
            .into_iter()
            .skip(start)
            .take(page.limit as usize)
            .collect())
    })
}

/// How many attribute metas the account has (system ones included).
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn count_attribute_metas(services: &Services, member: &Member) -> Result<u64, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        Ok(all_metas(tx, account)?.len() as u64)
    })
}
