//! All API tests in one binary (one link step), one module per resource.

mod accounts;
mod announcements;
mod api_reference;
mod automations;
mod campaign_setup;
mod contacts;
mod delivery_support;
mod errors;
mod feedback;
mod hostile;
mod import;
mod mail_servers;
mod messages;
mod metrics;
pub(crate) mod openapi;
mod operations;
mod rate_limit;
mod send_limit;
mod smtp_faults;
mod templates;
mod tenancy;
mod tokens;
mod topics;
mod tracking;
mod unsubscribe;
mod webhooks;
mod webhooks_delivery;
