use mailroom_domain::{sending_domain::address_domain, AccountId};

use crate::{ports::UnitOfWork, AppError};

/// The sender rule: once the account has a verified sending domain, a sender address
/// (`field`: a template's `fromEmail`, a mail server's `defaultFromEmail`) must be at one
/// of its verified domains or a subdomain of one. Accounts without a verified domain are
/// not held to it.
///
/// # Errors
/// [`AppError::Invalid`] naming `field`.
pub(crate) fn check_sender(
    tx: &mut dyn UnitOfWork,
    account: AccountId,
    field: &str,
    address: &str,
) -> Result<(), AppError> {
    let verified = tx.verified_domain_names(account)?;
    if verified.is_empty() {
        return Ok(());
    }
    let domain = address_domain(address).unwrap_or_default();
    if verified.iter().any(|name| name.covers(domain)) {
        return Ok(());
    }
    let names: Vec<&str> = verified.iter().map(|name| name.as_str()).collect();
    Err(AppError::invalid(
        field,
        format!(
            "must be an address at a verified sending domain of this account ({})",
            names.join(", ")
        ),
    ))
}
