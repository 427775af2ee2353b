//! The client value, its builder, and the one path every call takes: build the URL, send
//! with the token and the per-call timeout, read the answer within a size bound, turn an
//! error status into a [`Problem`], and retry what [`crate::retry`] allows.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use reqwest::{Method, StatusCode, Url};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{Error, Problem, Result};
use crate::operations::{Operation, Replay};
use crate::retry::{parse_retry_after, RetryBudget, RetryPolicy};

/// The header that makes a send safe to repeat (docs/api.md, "Idempotent sends").
pub const IDEMPOTENCY_KEY_HEADER: &str = "Idempotency-Key";

/// How much of a non-problem error body is kept as the problem's `detail`.
const FOREIGN_ERROR_DETAIL_BYTES: usize = 512;

/// A Mailroom API client: a base URL, a token, and how calls are made.
///
/// Cloning is cheap (the connection pool is shared), and the `with_*` methods return a
/// clone that differs in one setting, for a single call or a part of a program:
///
/// ```no_run
/// # async fn demo(client: mailroom_client::Client, account: mailroom_client::AccountId)
/// # -> Result<(), mailroom_client::Error> {
/// use std::time::Duration;
/// let total = client
///     .with_timeout(Duration::from_secs(2))
///     .count_contacts(account, &Default::default())
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
    timeout: Duration,
    retry: RetryPolicy,
    page_size: u32,
}

struct Shared {
    http: reqwest::Client,
    base: Url,
    authorization: Option<HeaderValue>,
    max_response_bytes: usize,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token stays out of logs.
        f.debug_struct("Client")
            .field("base", &self.shared.base.as_str())
            .field(
                "token",
                &self.shared.authorization.as_ref().map(|_| "[redacted]"),
            )
            .field("timeout", &self.timeout)
            .field("retry", &self.retry)
            .field("page_size", &self.page_size)
            .finish()
    }
}

/// Settings of a [`Client`]; see [`Client::builder`].
#[derive(Clone)]
pub struct ClientBuilder {
    base_url: String,
    token: Option<String>,
    timeout: Duration,
    connect_timeout: Duration,
    retry: RetryPolicy,
    page_size: u32,
    max_response_bytes: usize,
    user_agent: String,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("base_url", &self.base_url)
            .field("token", &self.token.as_ref().map(|_| "[redacted]"))
            .field("timeout", &self.timeout)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl ClientBuilder {
    /// The bearer token (`mailroom_pat_…`); without one only the public operations
    /// (health, OpenAPI document, links) succeed.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// The time one attempt may take, from sending to the last byte of the answer
    /// (default 30 s). Waiting between retries is bounded by the [`RetryPolicy`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The time a connection may take to open (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// When refused calls are retried (default [`RetryPolicy::default`]).
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Items fetched per request by the `stream_*` methods (1 to 100, default 100).
    pub fn page_size(mut self, page_size: u32) -> Self {
        self.page_size = page_size.clamp(1, crate::paging::MAX_PAGE_SIZE);
        self
    }

    /// The largest answer read (default 16 MiB); a larger one fails with
    /// [`Error::ResponseTooLarge`] instead of filling memory.
    pub fn max_response_bytes(mut self, bytes: usize) -> Self {
        self.max_response_bytes = bytes;
        self
    }

    /// The `User-Agent` sent (default `mailroom-client/<version>`).
    pub fn user_agent(mut self, user_agent: impl Into<String>) -> Self {
        self.user_agent = user_agent.into();
        self
    }

    /// Builds the client.
    ///
    /// # Errors
    /// [`Error::InvalidBaseUrl`] when the base URL is not an absolute `http`/`https` URL,
    /// [`Error::InvalidRequest`] when the token cannot be a header value.
    pub fn build(self) -> Result<Client> {
        let base = Url::parse(&self.base_url)
            .map_err(|error| Error::InvalidBaseUrl(format!("{}: {error}", self.base_url)))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(Error::InvalidBaseUrl(format!(
                "{}: not an http or https URL",
                self.base_url
            )));
        }
        let authorization = self
            .token
            .map(|token| {
                let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
                    .map_err(|_| Error::InvalidRequest("the token is not header-safe".into()))?;
                value.set_sensitive(true);
                Ok::<_, Error>(value)
            })
            .transpose()?;
        let http = reqwest::Client::builder()
            .use_rustls_tls()
            .connect_timeout(self.connect_timeout)
            .user_agent(self.user_agent)
            // Tracking links answer with a redirect to the tenant's URL: it is returned,
            // never followed.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| Error::InvalidRequest(format!("HTTP client: {error}")))?;
        Ok(Client {
            shared: Arc::new(Shared {
                http,
                base,
                authorization,
                max_response_bytes: self.max_response_bytes,
            }),
            timeout: self.timeout,
            retry: self.retry,
            page_size: self.page_size,
        })
    }
}

impl Client {
    /// A builder for a client of the server at `base_url` (e.g.
    /// `https://mailroom.example.com`; a path prefix is kept).
    pub fn builder(base_url: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            base_url: base_url.into(),
            token: None,
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
            page_size: crate::paging::MAX_PAGE_SIZE,
            max_response_bytes: 16 * 1024 * 1024,
            user_agent: concat!("mailroom-client/", env!("CARGO_PKG_VERSION")).to_owned(),
        }
    }

    /// A client with the default settings and `token`.
    ///
    /// # Errors
    /// As [`ClientBuilder::build`].
    pub fn new(base_url: impl Into<String>, token: impl Into<String>) -> Result<Self> {
        Self::builder(base_url).token(token).build()
    }

    /// This client with another per-attempt timeout.
    pub fn with_timeout(&self, timeout: Duration) -> Self {
        Self {
            timeout,
            ..self.clone()
        }
    }

    /// This client with another retry policy ([`RetryPolicy::NONE`] to turn retries off).
    pub fn with_retry(&self, retry: RetryPolicy) -> Self {
        Self {
            retry,
            ..self.clone()
        }
    }

    /// This client with another page size for the `stream_*` methods (1 to 100).
    pub fn with_page_size(&self, page_size: u32) -> Self {
        Self {
            page_size: page_size.clamp(1, crate::paging::MAX_PAGE_SIZE),
            ..self.clone()
        }
    }

    pub(crate) fn page_size(&self) -> u32 {
        self.page_size
    }

    /// The base URL with `operation`'s path, its placeholders filled in order by
    /// `arguments` (each percent-encoded as one segment), and `query`.
    fn url(&self, operation: &Operation, request: &Request) -> Result<Url> {
        let mut url = self.shared.base.clone();
        {
            let mut segments = url
                .path_segments_mut()
                .map_err(|()| Error::InvalidBaseUrl(self.shared.base.to_string()))?;
            segments.pop_if_empty();
            let mut arguments = request.arguments.iter();
            for segment in operation.path.split('/').filter(|s| !s.is_empty()) {
                if segment.starts_with('{') {
                    let argument = arguments.next().ok_or_else(|| {
                        Error::InvalidRequest(format!("{}: missing {segment}", operation.id))
                    })?;
                    segments.push(argument);
                } else {
                    segments.push(segment);
                }
            }
        }
        if !request.query.is_empty() {
            url.query_pairs_mut().extend_pairs(&request.query);
        }
        Ok(url)
    }

    /// Runs `operation`: retries what may be retried, and returns any answer below 400.
    pub(crate) async fn execute(
        &self,
        operation: &'static Operation,
        request: Request,
    ) -> Result<Answer> {
        let url = self.url(operation, &request)?;
        let method = Method::from_bytes(operation.method.as_bytes())
            .map_err(|_| Error::InvalidRequest(format!("method {}", operation.method)))?;
        let replayable = operation.replay == Replay::Always || request.idempotency_key.is_some();
        let mut budget = RetryBudget::new(self.retry);
        loop {
            let answer = self
                .attempt(operation, method.clone(), url.clone(), &request)
                .await?;
            if answer.status < 400 {
                return Ok(answer);
            }
            let problem = answer.into_problem();
            if replayable && matches!(problem.status, 429 | 503) {
                if let Some(delay) = budget.next_delay(problem.retry_after) {
                    tokio::time::sleep(delay).await;
                    continue;
                }
            }
            return Err(Error::Api(problem));
        }
    }

    async fn attempt(
        &self,
        operation: &'static Operation,
        method: Method,
        url: Url,
        request: &Request,
    ) -> Result<Answer> {
        let mut builder = self.shared.http.request(method, url).timeout(self.timeout);
        if let Some(authorization) = &self.shared.authorization {
            builder = builder.header(AUTHORIZATION, authorization.clone());
        }
        if let Some(key) = &request.idempotency_key {
            builder = builder.header(IDEMPOTENCY_KEY_HEADER, key.as_str());
        }
        if let Some((content_type, body)) = &request.body {
            builder = builder
                .header(CONTENT_TYPE, *content_type)
                .body(body.clone());
        }
        let transport = |source: reqwest::Error| {
            if source.is_timeout() {
                Error::Timeout {
                    operation: operation.id,
                }
            } else {
                Error::Transport {
                    operation: operation.id,
                    source,
                }
            }
        };
        let mut response = builder.send().await.map_err(transport)?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let limit = self.shared.max_response_bytes;
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(transport)? {
            if body.len() + chunk.len() > limit {
                return Err(Error::ResponseTooLarge {
                    operation: operation.id,
                    limit,
                });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Answer {
            operation: operation.id,
            status,
            headers,
            body,
        })
    }
}

/// The parts of one call besides its operation.
#[derive(Debug, Default)]
pub(crate) struct Request {
    arguments: Vec<String>,
    query: Vec<(&'static str, String)>,
    body: Option<(&'static str, Vec<u8>)>,
    idempotency_key: Option<String>,
}

impl Request {
    /// Path arguments, in the order of the path's placeholders.
    pub(crate) fn new<const N: usize>(arguments: [String; N]) -> Self {
        Self {
            arguments: arguments.into(),
            ..Self::default()
        }
    }

    pub(crate) fn query(mut self, query: impl IntoIterator<Item = (&'static str, String)>) -> Self {
        self.query.extend(query);
        self
    }

    pub(crate) fn json(mut self, body: &impl Serialize) -> Result<Self> {
        let bytes = serde_json::to_vec(body)
            .map_err(|error| Error::InvalidRequest(format!("body: {error}")))?;
        self.body = Some(("application/json", bytes));
        Ok(self)
    }

    pub(crate) fn raw(mut self, content_type: &'static str, body: Vec<u8>) -> Self {
        self.body = Some((content_type, body));
        self
    }

    pub(crate) fn idempotency_key(mut self, key: String) -> Self {
        self.idempotency_key = Some(key);
        self
    }
}

/// An answer read whole.
#[derive(Debug)]
pub(crate) struct Answer {
    operation: &'static str,
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Vec<u8>,
}

impl Answer {
    /// The body as `T`.
    pub(crate) fn json<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_slice(&self.body).map_err(|error| Error::Decode {
            operation: self.operation,
            reason: error.to_string(),
        })
    }

    /// The body as text.
    pub(crate) fn text(self) -> Result<String> {
        String::from_utf8(self.body).map_err(|error| Error::Decode {
            operation: self.operation,
            reason: error.to_string(),
        })
    }

    /// An error answer as a problem; one that is not problem+json gets the status's
    /// reason as its title and the start of the body as its detail.
    fn into_problem(self) -> Problem {
        let retry_after = self
            .headers
            .get(RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| parse_retry_after(value, SystemTime::now()));
        let reason = StatusCode::from_u16(self.status)
            .ok()
            .and_then(|status| status.canonical_reason())
            .unwrap_or("Error");
        let mut problem = serde_json::from_slice::<Problem>(&self.body)
            .ok()
            .filter(|problem| problem.status == self.status)
            .unwrap_or_else(|| {
                let end = self.body.len().min(FOREIGN_ERROR_DETAIL_BYTES);
                Problem {
                    status: self.status,
                    title: reason.to_owned(),
                    detail: String::from_utf8_lossy(&self.body[..end]).trim().to_owned(),
                    errors: Vec::new(),
                    retry_after: None,
                }
            });
        problem.retry_after = retry_after;
        problem
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINK: Operation = Operation {
        id: "unsubscribe_page",
        method: "GET",
        path: "/u/{token}",
        replay: Replay::Always,
    };

    #[test]
    fn urls_keep_the_base_path_and_encode_each_argument_as_one_segment() {
        let request = || {
            Request::new(["a/b c?d".to_owned()]).query([("email", "x+y@example.com".to_owned())])
        };
        let bare = Client::builder("https://mail.example")
            .build()
            .expect("client");
        assert_eq!(
            bare.url(&LINK, &request()).expect("url").as_str(),
            "https://mail.example/u/a%2Fb%20c%3Fd?email=x%2By%40example.com"
        );
        let prefixed = Client::builder("https://example.com/mailroom/")
            .build()
            .expect("client");
        assert_eq!(
            prefixed.url(&LINK, &request()).expect("url").path(),
            "/mailroom/u/a%2Fb%20c%3Fd"
        );
        let missing = bare.url(&LINK, &Request::new([]));
        assert!(matches!(missing, Err(Error::InvalidRequest(_))));
    }

    #[test]
    fn only_http_base_urls_are_accepted_and_the_token_is_not_printed() {
        for base in ["mailto:ops@example.com", "ftp://example.com", "not a url"] {
            assert!(matches!(
                Client::builder(base).build(),
                Err(Error::InvalidBaseUrl(_))
            ));
        }
        let builder = Client::builder("https://mail.example").token("mailroom_pat_secret");
        assert!(!format!("{builder:?}").contains("mailroom_pat_secret"));
        let client = builder.build().expect("client");
        assert!(!format!("{client:?}").contains("mailroom_pat_secret"));
        assert!(matches!(
            Client::new("https://mail.example", "line\nbreak"),
            Err(Error::InvalidRequest(_))
        ));
    }
}
