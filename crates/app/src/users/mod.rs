//! Users. There is no sign-up endpoint: the operator bootstraps users from the CLI.

mod bootstrap_user;

pub use bootstrap_user::{bootstrap_user, BootstrapRequest, Bootstrapped};
