use mailroom_domain::{
    webhook::{
        SigningSecret, WebhookConfig, WebhookSettings, WebhookSettingsInput, SIGNING_SECRET_BYTES,
    },
    AccountId,
};

use super::{open_webhook_config, seal_webhook_config};
use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// Replaces the account's webhook configuration. A `signingSecret` in the body rotates the
/// secret; without one the stored secret is kept, or the first save generates one.
/// Returns the configuration with the secret unmasked (the only response that does).
///
/// The URL must pass the egress policy ([`WebhookUrlGuard`](crate::ports::WebhookUrlGuard)):
/// `https`, and a host whose every address is public, unless private egress is allowed.
///
/// # Errors
/// [`AppError::Invalid`] naming each bad field (a refused URL names the reason);
/// [`AppError::Unauthorized`] when the caller is not a member.
pub fn set_webhooks(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    input: WebhookSettingsInput<'_>,
) -> Result<WebhookConfig, AppError> {
    let settings = WebhookSettings::parse(input)?;
    // Refuse non-members before touching the network, so the check cannot be used to
    // probe hosts; the lookup itself happens between the two transactions.
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account).map(drop)
    })?;
    services
        .webhook_url_guard
        .check_url(&settings.url)
        .map_err(|refusal| AppError::invalid("url", refusal.to_string()))?;
    let secrets = services.secrets.as_ref();
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        let stored_secret = tx
            .find_webhook_config(account)?
            .map(|stored| open_webhook_config(secrets, account, stored))
            .transpose()?
            .map(|config| config.signing_secret);
        let config = settings.into_config(stored_secret, || {
            let mut random = [0u8; SIGNING_SECRET_BYTES];
            secrets.fill_random(&mut random);
            SigningSecret::from_random(random)
        });
        let sealed = seal_webhook_config(secrets, account, &config);
        tx.save_webhook_config(account, &sealed, services.clock.now())?;
        Ok(config)
    })
}
