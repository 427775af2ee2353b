//! All API tests in one binary (one link step), one module per resource.

mod accounts;
mod contacts;
mod errors;
mod import;
mod mail_servers;
mod messages;
pub(crate) mod openapi;
mod operations;
mod templates;
mod tenancy;
mod tokens;
mod topics;
mod tracking;
mod unsubscribe;
mod webhooks;
mod webhooks_delivery;
