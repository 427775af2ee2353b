//! The connector under hyper's pooled client: one resolution per connection, checked by
//! the egress guard, then TCP (and TLS for `https`) to the checked address.

use std::{
    future::Future,
    io,
    net::SocketAddr,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use hyper::{
    rt::{Read, ReadBufCursor, Write},
    Uri,
};
use hyper_util::{
    client::legacy::connect::{Connected, Connection},
    rt::TokioIo,
};
use mailroom_app::ports::SendError;
use mailroom_dns::{DnsResolver, LookupError};
use tokio::net::TcpStream;
use tokio_rustls::{
    client::TlsStream,
    rustls::{pki_types::ServerName, ClientConfig},
    TlsConnector,
};

/// Why a connection was not made, carried through hyper's error so the sender can tell a
/// refusal (permanent) from a network failure (retried).
#[derive(Debug)]
pub(crate) struct ConnectFailure(pub SendError);

impl std::fmt::Display for ConnectFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for ConnectFailure {}

/// Connects to webhook endpoints through the egress guard.
#[derive(Clone)]
pub(crate) struct PinnedConnector {
    pub allow_private_egress: bool,
    pub tls: Arc<ClientConfig>,
    /// The shared resolver: one bounded lookup per connection, every answer checked.
    pub resolver: DnsResolver,
    /// Bounds resolution and the TCP and TLS handshakes (the sender's overall timeout
    /// bounds the whole attempt as well).
    pub connect_timeout: Duration,
}

impl tower_service::Service<Uri> for PinnedConnector {
    type Response = Stream;
    type Error = ConnectFailure;
    type Future = Pin<Box<dyn Future<Output = Result<Stream, ConnectFailure>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connector = self.clone();
        Box::pin(async move { connector.connect(uri).await.map_err(ConnectFailure) })
    }
}

impl PinnedConnector {
    async fn connect(self, uri: Uri) -> Result<Stream, SendError> {
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") if self.allow_private_egress => false,
            Some("http") => {
                return Err(SendError::Refused(
                    "plain http:// is allowed only with MAILROOM_ALLOW_PRIVATE_EGRESS".into(),
                ))
            }
            _ => return Err(SendError::Refused(format!("unsupported URL {uri}"))),
        };
        let host = uri
            .host()
            .map(|host| host.trim_start_matches('[').trim_end_matches(']'))
            .filter(|host| !host.is_empty())
            .ok_or_else(|| SendError::Refused(format!("the URL {uri} has no host")))?
            .to_owned();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let addresses = self.resolve_pinned(&host, port).await?;
        let tcp = self.connect_first(&addresses).await?;
        // Deliveries are one small write each; do not wait to coalesce them.
        let _ = tcp.set_nodelay(true);
        if !https {
            return Ok(Stream::Plain(TokioIo::new(tcp)));
        }
        let name = ServerName::try_from(host.clone())
            .map_err(|_| SendError::Refused(format!("{host} is not a valid TLS server name")))?;
        let tls = tokio::time::timeout(
            self.connect_timeout,
            TlsConnector::from(self.tls.clone()).connect(name, tcp),
        )
        .await
        .map_err(|_| SendError::Timeout(format!("the TLS handshake with {host}")))?
        .map_err(|error| SendError::Tls(format!("{host}: {error}")))?;
        Ok(Stream::Tls(Box::new(TokioIo::new(tls))))
    }

    /// Tries the checked addresses in the resolver's order, so a host whose first address
    /// is unreachable (IPv6 on an IPv4-only network) is still reached. Every address here
    /// passed the guard; none comes from a second resolution.
    async fn connect_first(&self, addresses: &[SocketAddr]) -> Result<TcpStream, SendError> {
        let mut last = SendError::Connect("no address to connect to".into());
        for &address in addresses {
            match tokio::time::timeout(self.connect_timeout, TcpStream::connect(address)).await {
                Ok(Ok(tcp)) => return Ok(tcp),
                Ok(Err(error)) => last = SendError::Connect(format!("{address}: {error}")),
                Err(_) => last = SendError::Timeout(format!("connecting to {address}")),
            }
        }
        Err(last)
    }

    /// Resolves `host` once and returns its addresses, every one checked by the guard.
    async fn resolve_pinned(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, SendError> {
        // The resolver refuses the host when any address is blocked, so on success every
        // one of them may be connected to.
        let addresses = self
            .resolver
            .resolve_checked(host, self.allow_private_egress)
            .await
            .map_err(|error| match error {
                LookupError::Refused(refusal) => SendError::Refused(refusal.to_string()),
                LookupError::Timeout(text) => SendError::Timeout(text),
                LookupError::NotFound(text) => SendError::Resolve(text),
            })?;
        Ok(addresses
            .into_iter()
            .map(|address| SocketAddr::new(address, port))
            .collect())
    }
}

/// A connection to a webhook endpoint, plain or TLS.
pub(crate) enum Stream {
    Plain(TokioIo<TcpStream>),
    Tls(Box<TokioIo<TlsStream<TcpStream>>>),
}

impl Connection for Stream {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl Read for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(io) => Pin::new(io).poll_read(cx, buf),
            Self::Tls(io) => Pin::new(io.as_mut()).poll_read(cx, buf),
        }
    }
}

impl Write for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(io) => Pin::new(io).poll_write(cx, buf),
            Self::Tls(io) => Pin::new(io.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(io) => Pin::new(io).poll_flush(cx),
            Self::Tls(io) => Pin::new(io.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(io) => Pin::new(io).poll_shutdown(cx),
            Self::Tls(io) => Pin::new(io.as_mut()).poll_shutdown(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(io) => io.is_write_vectored(),
            Self::Tls(io) => io.is_write_vectored(),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(io) => Pin::new(io).poll_write_vectored(cx, bufs),
            Self::Tls(io) => Pin::new(io.as_mut()).poll_write_vectored(cx, bufs),
        }
    }
}
