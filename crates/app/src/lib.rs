//! Mailroom's use cases and the ports they need.
//!
//! One module per resource, one file per use case. A use case is a plain function over
//! [`Services`]; it runs in exactly one database transaction through the
//! [`ports::Database`] port and never performs network I/O inside it (mail and webhook
//! deliveries are written as outbox rows for async workers).

pub mod accounts;
pub mod announcements;
pub mod auth;
pub mod automations;
pub mod console;
pub mod contacts;
pub mod domains;
pub mod error;
pub mod feedback;
pub mod feedback_sources;
pub mod forms;
pub mod mail_servers;
pub mod messages;
pub mod operations;
pub mod ports;
pub mod rendering;
pub mod return_path;
pub mod segments;
pub mod services;
pub mod suppressions;
pub mod templates;
pub mod tokens;
pub mod topics;
pub mod tracking;
pub mod ttl_cache;
pub mod unsubscribe;
pub mod users;
pub mod webhook_events;

pub use auth::Actor;
pub use error::{AppError, BrokenReference, Duplicate, StoreError};
pub use services::Services;
