//! The admin console's sign-in: one-time login links, browser sessions opened with a token
//! or a link, and their listing and revocation (`docs/console.md`). Everything else the
//! console shows goes through the same use cases as the API, with the session's [`Actor`].
//!
//! [`Actor`]: crate::Actor

mod authenticate_session;
mod create_login_link;
mod list_sessions;
mod revoke_session;
mod sign_in;

pub use authenticate_session::{authenticate_session, SignedIn};
pub use create_login_link::{create_login_link, LoginLink};
pub use list_sessions::list_sessions;
pub use revoke_session::revoke_session;
pub use sign_in::{sign_in_with_link, sign_in_with_token, NewSession, MAX_USER_AGENT_CHARS};
