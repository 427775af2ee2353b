use mailroom_domain::{
    attribute::{AttributeMeta, AttributeSource, SYSTEM_ATTRIBUTES},
    paging::PageRequest,
};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// The system attributes' metas, which come before the stored ones.
fn system_metas() -> impl Iterator<Item = AttributeMeta> {
    SYSTEM_ATTRIBUTES
        .iter()
        .map(|(slug, attribute_type)| AttributeMeta {
            slug: (*slug).to_owned(),
            attribute_type: *attribute_type,
            source: AttributeSource::System,
        })
}

/// One page of the account's attribute metas: system attributes first, then custom and
/// event attributes by slug. Only the page is read from the store.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn list_attribute_metas(
    services: &Services,
    member: &Member,
    page: PageRequest,
) -> Result<Vec<AttributeMeta>, AppError> {
    let account = member.account();
    let system = SYSTEM_ATTRIBUTES.len() as u64;
    let mut metas: Vec<AttributeMeta> = system_metas()
        .skip(usize::try_from(page.start).unwrap_or(usize::MAX))
        .take(page.limit as usize)
        .collect();
    let rest = page.limit.saturating_sub(metas.len() as u32);
    if rest == 0 {
        return Ok(metas);
    }
    let offset = page.start.saturating_sub(system);
    in_transaction(services.db.as_ref(), |tx| {
        metas.extend(tx.list_attribute_metas(account, offset, rest)?);
        Ok(())
    })?;
    Ok(metas)
}

/// How many attribute metas the account has (system ones included).
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn count_attribute_metas(services: &Services, member: &Member) -> Result<u64, AppError> {
    let account = member.account();
    let stored = in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.count_attribute_metas(account)?)
    })?;
    Ok(SYSTEM_ATTRIBUTES.len() as u64 + stored)
}
