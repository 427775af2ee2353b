//! What a call can fail with: the API's `application/problem+json` answer as a typed
//! [`Problem`], or a transport, timeout or decoding failure on the client's side.

use std::time::Duration;

use serde::Deserialize;

/// One field the server blamed, as listed in a problem's `errors`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FieldError {
    /// The field's name in the request, e.g. `email` or `attributes.plan`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

/// An error answer of the API (RFC 9457 problem details).
///
/// Every error the server produces has this shape. An answer that is not problem+json
/// (a proxy's HTML error page, say) is turned into one with the status, the reason phrase
/// as `title` and the start of the body as `detail`, so callers match one type.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Problem {
    /// The HTTP status code.
    pub status: u16,
    /// A short, fixed summary of the status, e.g. `Bad Request`.
    pub title: String,
    /// What went wrong, in a sentence.
    #[serde(default)]
    pub detail: String,
    /// The fields to blame; empty when no single field is.
    #[serde(default)]
    pub errors: Vec<FieldError>,
    /// The server's `Retry-After` (on 429 and 503), when it sent one.
    #[serde(skip)]
    pub retry_after: Option<Duration>,
}

impl Problem {
    /// The message for `field`, if the server blamed it.
    pub fn field(&self, field: &str) -> Option<&str> {
        self.errors
            .iter()
            .find(|error| error.field == field)
            .map(|error| error.message.as_str())
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status, self.title, self.detail)?;
        for error in &self.errors {
            write!(f, "; {}: {}", error.field, error.message)?;
        }
        Ok(())
    }
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server answered with an error status.
    #[error("the API refused the request: {0}")]
    Api(Problem),
    /// An attempt did not finish within the client's timeout.
    #[error("the request to {operation} timed out")]
    Timeout {
        /// The operation id of the call.
        operation: &'static str,
    },
    /// The request could not be sent or the answer not read (connection refused, TLS,
    /// a reset connection…).
    #[error("the request to {operation} failed: {source}")]
    Transport {
        /// The operation id of the call.
        operation: &'static str,
        /// What the HTTP client reported.
        #[source]
        source: reqwest::Error,
    },
    /// A success answer whose body is not what the operation documents.
    #[error("the answer of {operation} could not be read: {reason}")]
    Decode {
        /// The operation id of the call.
        operation: &'static str,
        /// What did not match.
        reason: String,
    },
    /// The answer was larger than [`crate::ClientBuilder::max_response_bytes`].
    #[error("the answer of {operation} exceeds {limit} bytes")]
    ResponseTooLarge {
        /// The operation id of the call.
        operation: &'static str,
        /// The limit in bytes.
        limit: usize,
    },
    /// The base URL given to the builder cannot carry API paths.
    #[error("invalid base URL: {0}")]
    InvalidBaseUrl(String),
    /// A value given to the client cannot be sent (for example a token with a newline).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
}

impl Error {
    /// The problem details when the server answered with an error status.
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            Self::Api(problem) => Some(problem),
            _ => None,
        }
    }

    /// The HTTP status of an [`Error::Api`].
    pub fn status(&self) -> Option<u16> {
        self.problem().map(|problem| problem.status)
    }
}

/// The result of every client call.
pub type Result<T, E = Error> = std::result::Result<T, E>;
