//! All API tests in one binary (one link step), one module per resource.

mod accounts;
mod errors;
mod openapi;
mod operations;
mod templates;
mod tenancy;
mod tokens;
mod webhooks;
