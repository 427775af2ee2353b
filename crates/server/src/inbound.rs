//! Wiring of the inbound SMTP listener (`mailroom inbound`, or `serve` with
//! `MAILROOM_INBOUND_LISTEN`): its settings from the configuration, its counts into
//! `mailroom_inbound_smtp_total` ([`crate::metrics`]). The protocol is
//! `mailroom_smtp::inbound`; the rules, `mailroom_app::return_path`.

use std::{net::SocketAddr, sync::Arc};

use anyhow::{Context, Result};
use mailroom_app::Services;
use mailroom_smtp::inbound::{tls_config_from_pem, InboundListener, InboundSettings};

use crate::config::Config;

/// Where `mailroom inbound` listens when `MAILROOM_INBOUND_LISTEN` is unset.
pub const DEFAULT_INBOUND_LISTEN: ([u8; 4], u16) = ([0, 0, 0, 0], 25);

/// The listener's bounds and certificate from `config`; the greeting names
/// `MAILROOM_INBOUND_HOST`, else `MAILROOM_SMTP_HELLO_NAME`, else `localhost`.
///
/// # Errors
/// When the certificate or key cannot be read.
pub fn inbound_settings(config: &Config) -> Result<InboundSettings> {
    let inbound = &config.inbound;
    let tls = match &inbound.tls {
        Some((cert, key)) => Some(
            tls_config_from_pem(cert, key)
                .map_err(|error| anyhow::anyhow!(error))
                .context("MAILROOM_INBOUND_TLS_CERT / MAILROOM_INBOUND_TLS_KEY")?,
        ),
        None => None,
    };
    Ok(InboundSettings {
        hostname: config
            .inbound_host
            .clone()
            .or_else(|| config.smtp_hello_name.clone())
            .unwrap_or_else(|| "localhost".into()),
        max_message_bytes: inbound.max_message_bytes,
        max_connections: inbound.max_connections,
        max_connections_per_ip: inbound.max_connections_per_ip,
        messages_per_ip_per_minute: inbound.messages_per_minute,
        idle_budget: inbound.idle_budget,
        tls,
        ..InboundSettings::default()
    })
}

/// Binds the listener at `address` (no runtime needed); serve it with
/// [`InboundListener::run`].
///
/// # Errors
/// When the settings are invalid or the address cannot be bound.
pub fn bind_inbound(
    config: &Config,
    address: SocketAddr,
    services: Services,
) -> Result<InboundListener> {
    let settings = inbound_settings(config)?;
    InboundListener::bind(
        address,
        settings,
        services,
        Arc::new(|outcome| crate::metrics::delivery_counters().inbound(outcome)),
    )
    .with_context(|| format!("binding {address} for inbound SMTP"))
}
