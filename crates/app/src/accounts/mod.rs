//! Accounts (workspaces): create with starter data, read, list, update, members, and the
//! webhook configuration.

mod add_member;
mod change_member_role;
mod create_account;
mod get_account;
mod list_accounts;
mod list_members;
mod members;
mod remove_member;
mod set_webhooks;
mod update_account;

pub use add_member::{add_member, operator_add_member, AddMemberRequest};
pub use change_member_role::change_member_role;
pub use create_account::{create_account, CreateAccountRequest};
pub use get_account::get_account;
pub use list_accounts::list_accounts;
pub use list_members::list_members;
pub use remove_member::{operator_remove_member, remove_member};
pub use set_webhooks::set_webhooks;
pub use update_account::{update_account, BrandingRequest, UpdateAccountRequest};

use mailroom_domain::{
    account::Account,
    secret::SecretString,
    webhook::{SigningSecret, WebhookConfig},
    AccountId,
};

use crate::{
    ports::{AccountRecord, SecretSlot, Secrets, StoredWebhookConfig, UnitOfWork},
    AppError,
};

const WEBHOOK_TABLE: &str = "webhook_configs";

pub(crate) fn webhook_slot(account: AccountId, column: &'static str) -> SecretSlot {
    SecretSlot {
        table: WEBHOOK_TABLE,
        column,
        row: account.to_string(),
    }
}

fn seal_webhook_config(
    secrets: &dyn Secrets,
    account: AccountId,
    config: &WebhookConfig,
) -> StoredWebhookConfig {
    StoredWebhookConfig {
        url: config.url.clone(),
        auth_type: config.auth_type,
        events: config.events.clone(),
        username: config.username.clone(),
        password_or_token: config
            .password_or_token
            .as_ref()
            .map(|secret| secrets.seal(secret, &webhook_slot(account, "password_or_token"))),
        signing_secret: secrets.seal(
            config.signing_secret.secret(),
            &webhook_slot(account, "signing_secret"),
        ),
    }
}

pub(crate) fn open_webhook_config(
    secrets: &dyn Secrets,
    account: AccountId,
    stored: StoredWebhookConfig,
) -> Result<WebhookConfig, AppError> {
    let unseal = |e: crate::ports::UnsealError| AppError::Internal(e.to_string());
    let signing: SecretString = secrets
        .open(
            &stored.signing_secret,
            &webhook_slot(account, "signing_secret"),
        )
        .map_err(unseal)?;
    let signing_secret = SigningSecret::parse(signing.expose())
        .map_err(|e| AppError::Internal(format!("stored signing secret: {e}")))?;
    let password_or_token = stored
        .password_or_token
        .map(|sealed| secrets.open(&sealed, &webhook_slot(account, "password_or_token")))
        .transpose()
        .map_err(unseal)?;
    Ok(WebhookConfig {
        url: stored.url,
        auth_type: stored.auth_type,
        events: stored.events,
        username: stored.username,
        password_or_token,
        signing_secret,
    })
}

/// Reads an account with its webhook configuration decrypted.
fn load_account(
    tx: &mut dyn UnitOfWork,
    secrets: &dyn Secrets,
    record: AccountRecord,
) -> Result<Account, AppError> {
    let webhooks = tx
        .find_webhook_config(record.id)?
        .map(|stored| open_webhook_config(secrets, record.id, stored))
        .transpose()?;
    Ok(Account {
        id: record.id,
        name: record.name,
        click_tracking: record.click_tracking,
        open_tracking: record.open_tracking,
        refuse_clear_text_auth: record.refuse_clear_text_auth,
        webhooks,
        branding: record.branding,
        created_at: record.created_at,
    })
}
