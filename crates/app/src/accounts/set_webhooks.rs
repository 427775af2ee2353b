use mailroom_domain::webhook::{
    SigningSecret, WebhookConfig, WebhookSettings, WebhookSettingsInput, SIGNING_SECRET_BYTES,
};

use super::{open_webhook_config, seal_webhook_config};
use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// Replaces the account's webhook configuration. A `signingSecret` in the body rotates the
/// secret; without one the stored secret is kept, or the first save generates one.
/// Returns the configuration with the secret unmasked (the only response that does).
///
/// The URL must pass the egress policy ([`WebhookUrlGuard`](crate::ports::WebhookUrlGuard)):
/// `https`, and a host whose every address is public, unless private egress is allowed.
///
/// # Errors
/// [`AppError::Invalid`] naming each bad field (a refused URL names the reason);
/// [`AppError`] when the store fails.
pub fn set_webhooks(
    services: &Services,
    member: &Member,
    input: WebhookSettingsInput<'_>,
) -> Result<WebhookConfig, AppError> {
    let account = member.account();
    let settings = WebhookSettings::parse(input)?;
    // Only a member (checked before this use case runs) gets here, so the lookup cannot
    // be used by outsiders to probe hosts; it happens outside any transaction.
    services
        .webhook_url_guard
        .check_url(&settings.url)
        .map_err(|refusal| AppError::invalid("url", refusal.to_string()))?;
    let secrets = services.secrets.as_ref();
    in_transaction(services.db.as_ref(), |tx| {
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
