//! A real HTTP/1.1 server on loopback for webhook tests: records every request it reads
//! and answers from a script (statuses, headers, delays, hangs, dropped connections).
//!
//! Like the SMTP test server it runs on its own thread with its own single-threaded tokio
//! runtime, so it never competes with the test's runtime, and dropping it closes every
//! connection. It is deliberately small: requests need `Content-Length` (chunked bodies
//! are not read), and connections are kept alive between requests as HTTP/1.1 says.
//! [`TestWebhookReceiver::start_tls`] serves HTTPS with a fresh self-signed certificate for
//! `localhost`, which a client must be told to trust.

use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// How the receiver answers one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReceiverReply {
    /// Answer with this status, these extra headers and this body.
    Respond {
        /// The status code.
        status: u16,
        /// Extra headers, e.g. `("Location", "/elsewhere")`.
        headers: Vec<(String, String)>,
        /// The body.
        body: String,
    },
    /// Wait, then answer as the inner reply says.
    Delay(Duration, Box<ReceiverReply>),
    /// Never answer; keep the connection open until the receiver stops.
    Hang,
    /// Close the connection without answering.
    Close,
}

impl ReceiverReply {
    /// A bare status with an empty body.
    pub fn status(status: u16) -> Self {
        Self::Respond {
            status,
            headers: Vec::new(),
            body: String::new(),
        }
    }

    /// A status with one extra header.
    pub fn with_header(status: u16, name: &str, value: &str) -> Self {
        Self::Respond {
            status,
            headers: vec![(name.to_owned(), value.to_owned())],
            body: String::new(),
        }
    }

    /// A status with a body.
    pub fn with_body(status: u16, body: &str) -> Self {
        Self::Respond {
            status,
            headers: Vec::new(),
            body: body.to_owned(),
        }
    }
}

/// One request the receiver read completely.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedRequest {
    /// `POST`, `GET`, …
    pub method: String,
    /// The request target, e.g. `/hooks?x=1`.
    pub path: String,
    /// Headers in arrival order, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body, byte for byte.
    pub body: Vec<u8>,
    /// When it was read.
    pub received_at: SystemTime,
}

impl ReceivedRequest {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// A running webhook receiver on `127.0.0.1` at a free port. Stops on drop.
pub struct TestWebhookReceiver {
    address: SocketAddr,
    certificate: Option<Vec<u8>>,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    acceptor: Option<TlsAcceptor>,
    script: Mutex<VecDeque<ReceiverReply>>,
    fallback: ReceiverReply,
    requests: Mutex<Vec<ReceivedRequest>>,
    connections: AtomicUsize,
}

impl TestWebhookReceiver {
    /// A receiver that answers 200 to everything not scripted.
    ///
    /// # Panics
    /// When the port cannot be bound or the runtime cannot start (a broken test machine).
    pub fn start() -> Self {
        Self::start_with(ReceiverReply::status(200))
    }

    /// A receiver that answers `fallback` to everything not scripted.
    ///
    /// # Panics
    /// As [`TestWebhookReceiver::start`].
    pub fn start_with(fallback: ReceiverReply) -> Self {
        Self::start_inner(fallback, false)
    }

    /// An HTTPS receiver (certificate for `localhost`, see
    /// [`TestWebhookReceiver::certificate_der`]) answering 200 to everything not scripted.
    ///
    /// # Panics
    /// As [`TestWebhookReceiver::start`].
    pub fn start_tls() -> Self {
        Self::start_inner(ReceiverReply::status(200), true)
    }

    fn start_inner(fallback: ReceiverReply, tls: bool) -> Self {
        let listener = StdTcpListener::bind("127.0.0.1:0").expect("bind the webhook receiver");
        listener
            .set_nonblocking(true)
            .expect("make the webhook receiver's listener non-blocking");
        let address = listener.local_addr().expect("the receiver's address");
        let (acceptor, certificate) = if tls {
            let (acceptor, certificate) = self_signed_acceptor();
            (Some(acceptor), Some(certificate))
        } else {
            (None, None)
        };
        let shared = Arc::new(Shared {
            acceptor,
            script: Mutex::new(VecDeque::new()),
            fallback,
            requests: Mutex::new(Vec::new()),
            connections: AtomicUsize::new(0),
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("start the webhook receiver's runtime");
        let (shutdown, stop) = oneshot::channel();
        let serving = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("test-webhooks-{}", address.port()))
            .spawn(move || runtime.block_on(serve(listener, serving, stop)))
            .expect("spawn the webhook receiver thread");
        Self {
            address,
            certificate,
            shared,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    /// Queues replies for the next requests, in order; after them the fallback answers.
    pub fn script(&self, replies: impl IntoIterator<Item = ReceiverReply>) {
        lock(&self.shared.script).extend(replies);
    }

    /// `http://127.0.0.1:PORT{path}` (`https://localhost:PORT{path}` for a TLS receiver,
    /// the name its certificate is for).
    pub fn url(&self, path: &str) -> String {
        match self.certificate {
            None => format!("http://{}{path}", self.address),
            Some(_) => format!("https://localhost:{}{path}", self.address.port()),
        }
    }

    /// The DER of a TLS receiver's self-signed certificate, for the client's trust store.
    pub fn certificate_der(&self) -> Option<&[u8]> {
        self.certificate.as_deref()
    }

    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Every request read so far, oldest first.
    pub fn requests(&self) -> Vec<ReceivedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// How many TCP connections were accepted (egress tests assert 0).
    pub fn connection_count(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }
}

impl Drop for TestWebhookReceiver {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A fresh self-signed certificate for `localhost` per receiver: nothing to ship or expire.
fn self_signed_acceptor() -> (TlsAcceptor, Vec<u8>) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
        .expect("generate a self-signed certificate");
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    let der = certified.cert.der().to_vec();
    // The provider is named, not taken from the process default, so it works whichever
    // rustls providers other crates in the test binary enable.
    let config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("TLS protocol versions")
            .with_no_client_auth()
            .with_single_cert(vec![certified.cert.der().clone()], key)
            .expect("TLS server configuration");
    (TlsAcceptor::from(Arc::new(config)), der)
}

/// A poisoned lock only means another test thread panicked; the data is still good.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn serve(listener: StdTcpListener, shared: Arc<Shared>, mut stop: oneshot::Receiver<()>) {
    let listener = TcpListener::from_std(listener).expect("hand the listener to tokio");
    loop {
        tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                shared.connections.fetch_add(1, Ordering::SeqCst);
                let shared = Arc::clone(&shared);
                // Errors just end the connection, as a peer hanging up would.
                tokio::spawn(async move {
                    match shared.acceptor.clone() {
                        None => run_connection(stream, &shared).await,
                        Some(acceptor) => match acceptor.accept(stream).await {
                            Ok(tls) => run_connection(tls, &shared).await,
                            Err(error) => Err(error),
                        },
                    }
                });
            }
        }
    }
}

async fn run_connection<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    shared: &Shared,
) -> io::Result<()> {
    let mut stream = BufReader::new(stream);
    while let Some(request) = read_request(&mut stream).await? {
        lock(&shared.requests).push(request);
        let reply = lock(&shared.script)
            .pop_front()
            .unwrap_or_else(|| shared.fallback.clone());
        if !answer(stream.get_mut(), reply).await? {
            return Ok(());
        }
    }
    Ok(())
}

/// Reads one request; `None` when the peer closed the connection between requests.
async fn read_request<S: AsyncRead + Unpin>(
    stream: &mut BufReader<S>,
) -> io::Result<Option<ReceivedRequest>> {
    let mut line = String::new();
    if stream.read_line(&mut line).await? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        if stream.read_line(&mut header).await? == 0 {
            return Ok(None);
        }
        let header = header.trim_end_matches(['\r', '\n']);
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let length = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await?;
    Ok(Some(ReceivedRequest {
        method,
        path,
        headers,
        body,
        received_at: SystemTime::now(),
    }))
}

/// Answers as `reply` says; `false` when the connection must end.
async fn answer<S: AsyncWrite + Unpin>(stream: &mut S, reply: ReceiverReply) -> io::Result<bool> {
    let mut reply = reply;
    loop {
        match reply {
            ReceiverReply::Delay(wait, then) => {
                tokio::time::sleep(wait).await;
                reply = *then;
            }
            ReceiverReply::Hang => {
                std::future::pending::<()>().await;
                return Ok(false);
            }
            ReceiverReply::Close => {
                stream.shutdown().await?;
                return Ok(false);
            }
            ReceiverReply::Respond {
                status,
                headers,
                body,
            } => {
                let mut head = format!(
                    "HTTP/1.1 {status} {}\r\nContent-Length: {}\r\n",
                    reason(status),
                    body.len()
                );
                for (name, value) in headers {
                    head.push_str(&format!("{name}: {value}\r\n"));
                }
                head.push_str("\r\n");
                stream.write_all(head.as_bytes()).await?;
                stream.write_all(body.as_bytes()).await?;
                stream.flush().await?;
                return Ok(true);
            }
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        307 => "Temporary Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        410 => "Gone",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}
