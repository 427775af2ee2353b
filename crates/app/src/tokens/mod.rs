//! Personal access tokens: issue, list, revoke, and authenticate a presented token.

mod authenticate;
mod cache;
mod issue_token;
mod list_tokens;
mod revoke_token;

pub use authenticate::{authenticate, LAST_USED_WRITE_INTERVAL};
pub use cache::{TokenCache, TOKEN_CACHE_CAPACITY, TOKEN_CACHE_TTL};
pub use issue_token::{issue_token, issue_token_as, IssueTokenRequest, IssuedToken};
pub use list_tokens::list_tokens;
pub use revoke_token::revoke_token;
