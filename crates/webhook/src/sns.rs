//! [`HyperSnsClient`]: the `SnsClient` port, the one outbound call of SES feedback
//! sources (the signing certificate of an SNS message, the confirmation of a
//! subscription). It dials through the same [`PinnedConnector`] as webhook deliveries, so
//! every address passes the egress guard, and it follows no redirect.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty};
use hyper::{header, Request, Uri};
use hyper_util::{
    client::legacy::Client,
    rt::{TokioExecutor, TokioTimer},
};
use mailroom_app::ports::{SnsAnswer, SnsClient};
use mailroom_dns::DnsResolver;
use tokio_rustls::rustls::{crypto::ring::default_provider, ClientConfig, RootCertStore};

use crate::connector::PinnedConnector;

/// The time one fetch may take, from resolution to the last byte read.
pub const SNS_TIMEOUT: Duration = Duration::from_secs(10);

/// Fetches from SNS over HTTPS (plain HTTP only with private egress allowed, for tests).
#[derive(Clone)]
pub struct HyperSnsClient {
    connector: PinnedConnector,
    timeout: Duration,
}

impl HyperSnsClient {
    /// A client dialling through `resolver` and the egress guard.
    ///
    /// # Panics
    /// When rustls refuses its default protocol versions (it does not).
    pub fn new(allow_private_egress: bool, resolver: DnsResolver, timeout: Duration) -> Self {
        let mut roots = RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let mut tls = ClientConfig::builder_with_provider(Arc::new(default_provider()))
            .with_safe_default_protocol_versions()
            .expect("rustls' default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Self {
            connector: PinnedConnector {
                allow_private_egress,
                tls: Arc::new(tls),
                resolver,
                connect_timeout: timeout,
            },
            timeout,
        }
    }

    async fn fetch(&self, url: &str, max_body: usize) -> Result<SnsAnswer, String> {
        let uri: Uri = url.parse().map_err(|error| format!("{url}: {error}"))?;
        let client: Client<PinnedConnector, Empty<Bytes>> = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .pool_timer(TokioTimer::new())
            .build(self.connector.clone());
        let request = Request::get(uri)
            .header(
                header::USER_AGENT,
                concat!("Mailroom/", env!("CARGO_PKG_VERSION")),
            )
            .body(Empty::new())
            .map_err(|error| error.to_string())?;
        let exchange = async {
            let response = client
                .request(request)
                .await
                .map_err(|error| describe(&error))?;
            let status = response.status().as_u16();
            let mut body = response.into_body();
            let mut read = Vec::new();
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|error| error.to_string())?;
                if let Some(data) = frame.data_ref() {
                    if read.len() + data.len() > max_body {
                        return Err(format!("the answer is larger than {max_body} bytes"));
                    }
                    read.extend_from_slice(data);
                }
            }
            Ok(SnsAnswer { status, body: read })
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| format!("no complete answer within {} s", self.timeout.as_secs()))?
    }
}

fn describe(error: &hyper_util::client::legacy::Error) -> String {
    use std::error::Error as _;
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

impl SnsClient for HyperSnsClient {
    fn get(&self, url: &str, max_body: usize) -> Result<SnsAnswer, String> {
        // Called from the blocking pool, outside any runtime: a small runtime of its own
        // per fetch (certificates are cached, confirmations rare).
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| error.to_string())?;
        runtime.block_on(self.fetch(url, max_body))
    }
}

#[cfg(test)]
mod tests {
    use mailroom_test_support::{ReceiverReply, TestWebhookReceiver};

    use super::*;

    #[test]
    fn answers_are_read_up_to_their_bound_and_loopback_needs_private_egress() {
        let server = TestWebhookReceiver::start_with(ReceiverReply::with_body(200, "certificate"));
        let url = server.url("/c.pem");
        let allowed = HyperSnsClient::new(true, DnsResolver::process_default(), SNS_TIMEOUT);
        assert_eq!(
            allowed.get(&url, 64),
            Ok(SnsAnswer {
                status: 200,
                body: b"certificate".to_vec()
            })
        );
        let refused = allowed.get(&url, 4).expect_err("over the bound");
        assert!(refused.contains("larger than 4 bytes"), "{refused}");
        assert_eq!(server.requests().len(), 2);

        // Without private egress: plain http is refused, and so is an https URL whose
        // host resolves to loopback, before any connection.
        let guarded = HyperSnsClient::new(false, DnsResolver::process_default(), SNS_TIMEOUT);
        let refused = guarded.get(&url, 64).expect_err("plain http is refused");
        assert!(refused.contains("http://"), "{refused}");
        let tls = TestWebhookReceiver::start_tls();
        let refused = guarded
            .get(&tls.url("/c.pem"), 64)
            .expect_err("loopback is refused");
        assert!(refused.contains("loopback"), "{refused}");
        assert_eq!(
            server.requests().len(),
            2,
            "nothing more reached the server"
        );
        assert_eq!(tls.connection_count(), 0, "nothing reached the TLS server");
    }
}
