//! All API tests in one binary (one link step), one module per resource.

mod accounts;
mod contacts;
mod errors;
mod import;
mod mail_servers;
mod messages;
mod metrics;
pub(crate) mod openapi;
mod operations;
mod rate_limit;
mod templates;
mod tenancy;
mod tokens;
mod topics;
mod webhooks;
mod webhooks_delivery;
