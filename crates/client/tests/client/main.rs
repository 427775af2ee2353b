//! The client against the real server: the in-process application of tests/api
//! (`mailroom_tests::spawn_app`) on a fresh PostgreSQL database per test, with the real
//! loopback SMTP server, webhook receiver and DNS server of crates/test-support. The only
//! stand-in is the scripted HTTP server of `retries.rs`, for the 503 answers and bounds a
//! real server cannot be made to give on cue.

mod calls;
mod dependencies;
mod domains;
mod operations;
mod retries;
mod support;
mod webhooks;
