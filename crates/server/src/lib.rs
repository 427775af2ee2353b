//! The `mailroom` binary's library half: configuration, wiring of adapters into the app's
//! ports, the background workers and logging. `main.rs` is only the CLI.

pub mod announcement_worker;
pub mod application;
pub mod config;
pub mod domain_dns;
pub mod event_names_worker;
pub mod inbound;
pub mod message_worker;
pub mod metrics;
pub mod render_sandbox;
pub mod system;
pub mod telemetry;
pub mod webhook_worker;
pub mod workers;

pub use application::Application;
pub use config::Config;
