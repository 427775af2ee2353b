//! [`HyperWebhookSender`]: the `WebhookSender` port over hyper's pooled HTTP/1.1 client.

use std::{
    error::Error as _,
    sync::Arc,
    time::{Duration, SystemTime},
};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::{
    body::Incoming,
    header::{self, HeaderValue},
    Request, Response, Uri,
};
use hyper_util::{
    client::legacy::Client,
    rt::{TokioExecutor, TokioTimer},
};
use mailroom_app::ports::{
    SendError, SendFuture, WebhookAnswer, WebhookAuth, WebhookRequest, WebhookSender,
};
use mailroom_dns::DnsResolver;
use mailroom_domain::webhook_signature::{self, ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use tokio_rustls::rustls::{
    crypto::ring::default_provider, pki_types::CertificateDer, ClientConfig, RootCertStore,
};

use crate::connector::{ConnectFailure, PinnedConnector};

/// The total time one attempt may take (docs/design.md#10-webhooks).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);

/// How many bytes of an answer's body are kept for the event's `lastError`.
const EXCERPT_BYTES: usize = 256;

/// How the sender behaves.
#[derive(Debug, Clone)]
pub struct SenderSettings {
    /// `MAILROOM_ALLOW_PRIVATE_EGRESS`: private and loopback targets and plain `http`.
    pub allow_private_egress: bool,
    /// The total time of one attempt: resolution, connection, TLS, request, answer.
    pub timeout: Duration,
    /// Trust anchors beside the webpki roots (a private CA; tests).
    pub extra_roots: Vec<CertificateDer<'static>>,
    /// Resolves each new connection's host (the server's shared resolver).
    pub resolver: DnsResolver,
}

impl Default for SenderSettings {
    fn default() -> Self {
        Self {
            allow_private_egress: false,
            timeout: DEFAULT_TIMEOUT,
            extra_roots: Vec::new(),
            resolver: DnsResolver::process_default(),
        }
    }
}

/// Delivers webhook requests with hyper; connections are pooled per host and port.
pub struct HyperWebhookSender {
    client: Client<PinnedConnector, Full<Bytes>>,
    timeout: Duration,
}

impl HyperWebhookSender {
    /// A sender with `settings`. Needs no runtime to build; requests must be made on a
    /// tokio runtime.
    ///
    /// # Panics
    /// When an extra root certificate is not a valid trust anchor, or rustls refuses its
    /// default protocol versions (neither happens with valid input).
    pub fn new(settings: SenderSettings) -> Self {
        let mut roots = RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        for certificate in settings.extra_roots {
            roots
                .add(certificate)
                .expect("an extra root certificate must be a valid trust anchor");
        }
        // The provider is named, not taken from the process default, so it works whichever
        // rustls providers other crates in the binary enable.
        let mut tls = ClientConfig::builder_with_provider(Arc::new(default_provider()))
            .with_safe_default_protocol_versions()
            .expect("rustls' default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let connector = PinnedConnector {
            allow_private_egress: settings.allow_private_egress,
            tls: Arc::new(tls),
            connect_timeout: settings.timeout,
            resolver: settings.resolver,
        };
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(64)
            .pool_timer(TokioTimer::new())
            .build(connector);
        Self {
            client,
            timeout: settings.timeout,
        }
    }

    async fn deliver(&self, request: &WebhookRequest) -> Result<WebhookAnswer, SendError> {
        let http_request = build_request(request)?;
        let exchange = async {
            let response = self.client.request(http_request).await.map_err(classify)?;
            Ok::<_, SendError>(read_answer(response).await)
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(SendError::Timeout(format!(
                "no complete answer within {} s",
                self.timeout.as_secs_f32()
            ))),
        }
    }
}

impl WebhookSender for HyperWebhookSender {
    fn send<'a>(&'a self, request: &'a WebhookRequest) -> SendFuture<'a> {
        Box::pin(self.deliver(request))
    }
}

/// The signed POST. A credential that cannot be an HTTP header value (a control character
/// in a token) can never be sent, so it is a refusal, not a retry.
fn build_request(request: &WebhookRequest) -> Result<Request<Full<Bytes>>, SendError> {
    let uri: Uri = request
        .url
        .as_str()
        .parse()
        .map_err(|error| SendError::Refused(format!("the URL cannot be used: {error}")))?;
    let id = request.event_id.to_string();
    let timestamp = request.timestamp.as_datetime().unix_timestamp();
    let signature = webhook_signature::sign(&request.signing_secret, &id, timestamp, &request.body);
    let mut builder = Request::post(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .header(
            header::USER_AGENT,
            concat!("Mailroom-Webhooks/", env!("CARGO_PKG_VERSION")),
        )
        .header(ID_HEADER, id)
        .header(TIMESTAMP_HEADER, timestamp.to_string())
        .header(SIGNATURE_HEADER, signature);
    let authorization = match &request.auth {
        WebhookAuth::None => None,
        WebhookAuth::Basic { username, password } => Some(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD
                .encode(format!("{username}:{}", password.expose()))
        )),
        WebhookAuth::Bearer { token } => Some(format!("Bearer {}", token.expose())),
    };
    if let Some(value) = authorization {
        let mut value = HeaderValue::try_from(value).map_err(|_| {
            SendError::Refused("the credentials cannot be sent in an HTTP header".into())
        })?;
        value.set_sensitive(true);
        builder = builder.header(header::AUTHORIZATION, value);
    }
    builder
        .body(Full::new(Bytes::from(request.body.clone())))
        .map_err(|error| SendError::Refused(format!("the request cannot be built: {error}")))
}

/// Status, `Retry-After` and the first bytes of the body. Reading stops after the excerpt:
/// the answer's content does not matter, and a huge or endless body must not hold the
/// worker (dropping the rest closes that connection instead of returning it to the pool).
async fn read_answer(response: Response<Incoming>) -> WebhookAnswer {
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| parse_retry_after(value, SystemTime::now()));
    let mut body = response.into_body();
    let mut excerpt = Vec::new();
    while excerpt.len() < EXCERPT_BYTES {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    excerpt.extend_from_slice(data);
                }
            }
            // A body cut short still leaves a valid status: judge by the status.
            Some(Err(_)) | None => break,
        }
    }
    excerpt.truncate(EXCERPT_BYTES);
    WebhookAnswer {
        status,
        retry_after,
        body_excerpt: String::from_utf8_lossy(&excerpt).into_owned(),
    }
}

/// Tells a refused or failed connection apart from a broken exchange by walking the error
/// chain to the connector's own error.
fn classify(error: hyper_util::client::legacy::Error) -> SendError {
    let mut source = error.source();
    while let Some(cause) = source {
        if let Some(failure) = cause.downcast_ref::<ConnectFailure>() {
            return failure.0.clone();
        }
        source = cause.source();
    }
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    if error.is_connect() {
        SendError::Connect(message)
    } else {
        SendError::Protocol(message)
    }
}

/// `Retry-After` as delay-seconds or as an HTTP date (RFC 9110 §10.2.3); a date in the
/// past means now.
fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let format = time::macros::format_description!(
        "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
    );
    let at = time::PrimitiveDateTime::parse(value, &format)
        .ok()?
        .assume_utc();
    let at = SystemTime::from(at);
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777);
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:51:37 GMT", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-5", now), None);
    }
}
