use mailroom_domain::{
    account::{Account, AccountName, AccountPatch},
    ValidationErrors,
};

use super::load_account;
use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// The raw fields of an account PATCH; `None` means the key was absent.
#[derive(Debug, Clone, Default)]
pub struct UpdateAccountRequest {
    /// `name`.
    pub name: Option<String>,
    /// `clickTracking`.
    pub click_tracking: Option<bool>,
    /// `openTracking`.
    pub open_tracking: Option<bool>,
}

/// A genuine partial update: omitted fields stay; an empty body is refused.
///
/// # Errors
/// [`AppError::Invalid`] for an empty patch or a bad name.
pub fn update_account(
    services: &Services,
    member: &Member,
    request: UpdateAccountRequest,
) -> Result<Account, AppError> {
    let account = member.account();
    let mut errors = ValidationErrors::new();
    let name = request
        .name
        .as_deref()
        .and_then(|name| errors.collect("name", AccountName::parse(name)));
    errors.into_result()?;
    let patch = AccountPatch {
        name,
        click_tracking: request.click_tracking,
        open_tracking: request.open_tracking,
    };
    if patch.is_empty() {
        return Err(AppError::BadRequest(
            "the body must change at least one of name, clickTracking, openTracking".into(),
        ));
    }
    in_transaction(services.db.as_ref(), |tx| {
        let mut record = tx.find_account(account)?.ok_or(AppError::Unauthorized)?;
        if let Some(name) = patch.name {
            record.name = name;
        }
        record.click_tracking = patch.click_tracking.unwrap_or(record.click_tracking);
        record.open_tracking = patch.open_tracking.unwrap_or(record.open_tracking);
        tx.update_account(&record)?;
        load_account(tx, services.secrets.as_ref(), record)
    })
}
