use mailroom_domain::{
    account::{Account, AccountName, AccountPatch},
    branding::{AccentColor, BrandingPatch, DisplayName, LogoUrl},
    patch::Field,
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
    /// `branding`: absent keeps it, `null` clears every part.
    pub branding: Field<BrandingRequest>,
    /// `refuseClearTextAuth`.
    pub refuse_clear_text_auth: Option<bool>,
}

/// The raw fields of `branding` in an account PATCH: each absent (kept), `null`
/// (cleared) or a value.
#[derive(Debug, Clone, Default)]
pub struct BrandingRequest {
    /// `branding.displayName`.
    pub display_name: Field<String>,
    /// `branding.logoUrl`.
    pub logo_url: Field<String>,
    /// `branding.accentColor`.
    pub accent_color: Field<String>,
}

/// Checks each part of `request`, naming the field of every error.
fn branding_patch(request: BrandingRequest, errors: &mut ValidationErrors) -> BrandingPatch {
    fn check<T, E: std::fmt::Display>(
        field: Field<String>,
        name: &str,
        parse: impl FnOnce(&str) -> Result<T, E>,
        errors: &mut ValidationErrors,
    ) -> Field<T> {
        match field {
            Field::Absent => Field::Absent,
            Field::Null => Field::Null,
            Field::Value(text) => errors
                .collect(name, parse(&text))
                .map_or(Field::Absent, Field::Value),
        }
    }
    BrandingPatch {
        display_name: check(
            request.display_name,
            "branding.displayName",
            DisplayName::parse,
            errors,
        ),
        logo_url: check(request.logo_url, "branding.logoUrl", LogoUrl::parse, errors),
        accent_color: check(
            request.accent_color,
            "branding.accentColor",
            AccentColor::parse,
            errors,
        ),
    }
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
    let branding = match request.branding {
        Field::Absent => None,
        Field::Null => Some(BrandingPatch::clear_all()),
        Field::Value(branding) => Some(branding_patch(branding, &mut errors)),
    };
    errors.into_result()?;
    let patch = AccountPatch {
        name,
        click_tracking: request.click_tracking,
        open_tracking: request.open_tracking,
        branding,
        refuse_clear_text_auth: request.refuse_clear_text_auth,
    };
    if patch.is_empty() {
        return Err(AppError::BadRequest(
            "the body must change at least one of name, clickTracking, openTracking, branding, \
             refuseClearTextAuth"
                .into(),
        ));
    }
    in_transaction(services.db.as_ref(), |tx| {
        let mut record = tx.find_account(account)?.ok_or(AppError::Unauthorized)?;
        if let Some(name) = patch.name {
            record.name = name;
        }
        record.click_tracking = patch.click_tracking.unwrap_or(record.click_tracking);
        record.open_tracking = patch.open_tracking.unwrap_or(record.open_tracking);
        record.refuse_clear_text_auth = patch
            .refuse_clear_text_auth
            .unwrap_or(record.refuse_clear_text_auth);
        if let Some(branding) = patch.branding {
            record.branding = branding.apply(record.branding);
        }
        tx.update_account(&record)?;
        load_account(tx, services.secrets.as_ref(), record)
    })
}
