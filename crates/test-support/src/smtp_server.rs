//! A real SMTP server on loopback for tests: speaks enough ESMTP for lettre (EHLO, AUTH
//! PLAIN/LOGIN, STARTTLS or implicit TLS with a self-signed certificate for `localhost`,
//! MAIL/RCPT/DATA, PIPELINING), records what it receives, and can be told to refuse.
//!
//! It runs on its own thread with its own single-threaded tokio runtime, so blocking tests
//! (the probe) and async tests (actix, workers) use it the same way, and it never
//! competes with the test's own runtime. Dropping it stops the runtime, which closes
//! every connection.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// How the test server secures connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TlsMode {
    /// Plaintext only; STARTTLS is not offered.
    #[default]
    None,
    /// Plaintext, with STARTTLS offered in EHLO.
    StartTls,
    /// TLS from the first byte.
    Implicit,
}

/// What the test server offers and how it answers.
#[derive(Debug, Clone, Default)]
pub struct TestSmtpOptions {
    /// TLS mode; the certificate is self-signed for `localhost`.
    pub tls: TlsMode,
    /// The one valid `(user, password)` at the start. `None` advertises no AUTH (an
    /// internal relay) and lets MAIL through unauthenticated; `Some` requires AUTH before
    /// MAIL (530). [`TestSmtpServer::set_credentials`] changes what is valid later.
    pub auth: Option<(String, String)>,
    /// Advertise AUTH and answer every attempt with 535.
    pub refuse_auth: bool,
    /// Answer every RCPT TO with this line (e.g. `550 5.1.1 no such user`) instead of 250.
    /// A reply not starting with `2` leaves the recipient out.
    pub reply_to_rcpt: Option<String>,
    /// Answer the end of DATA with this line instead of 250. A reply not starting with
    /// `2` means the message is not recorded.
    pub reply_to_data: Option<String>,
    /// Wait this long after the end of DATA before accepting (recording, then answering),
    /// as a busy server does: it keeps messages in flight, so a client killed in that
    /// window has delivered a message it never learns about.
    pub accept_delay: Option<Duration>,
    /// Close a connection that sent nothing for this long, saying `421 4.4.2` first (as
    /// Postfix does at its `smtpd_timeout`).
    pub idle_disconnect: Option<Duration>,
    /// Leave `PIPELINING` (RFC 2920) out of the EHLO reply: a server that takes one
    /// command at a time. Offered by default, as Postfix and the large providers do.
    pub no_pipelining: bool,
}

/// One message the server accepted (the end of DATA answered 2xx).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedMessage {
    /// The MAIL FROM address, without angle brackets (empty for the null sender).
    pub from: String,
    /// The accepted RCPT TO addresses, in order.
    pub recipients: Vec<String>,
    /// The message as sent after DATA, dot-unstuffed, lines ending in CRLF, without the
    /// final `.` line (read as UTF-8, lossily).
    pub data: String,
    /// The user that authenticated on this connection, if any.
    pub authenticated_as: Option<String>,
    /// The password that authenticated this connection, if any: which credentials the
    /// session that carried the message was opened with.
    pub authenticated_with: Option<String>,
    /// Whether the connection was encrypted (implicit TLS or after STARTTLS).
    pub tls: bool,
    /// The name the client gave in EHLO (or HELO) on this connection.
    pub hello: String,
    /// The client had already sent the commands after `MAIL FROM` (its `RCPT TO`s and
    /// `DATA`) when `MAIL FROM` was read: the envelope came pipelined.
    pub pipelined: bool,
}

/// A running test SMTP server on `127.0.0.1` at a free port. Stops on drop.
pub struct TestSmtpServer {
    address: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// State the connections share with the test.
struct Shared {
    options: TestSmtpOptions,
    acceptor: Option<TlsAcceptor>,
    messages: Mutex<Vec<ReceivedMessage>>,
    connections: AtomicUsize,
    /// Connections open now, and the most ever open at once.
    open: AtomicUsize,
    peak_open: AtomicUsize,
    /// Replies to the next RCPT TOs, one each, before the options' reply applies again.
    rcpt_script: Mutex<VecDeque<String>>,
    /// Replies to the next MAIL FROMs, one each, before 250 applies again.
    mail_script: Mutex<VecDeque<String>>,
    /// Replies to RCPT TO of these addresses (lower case), every time.
    rcpt_by_address: Mutex<HashMap<String, String>>,
    /// The valid `(user, password)` pairs (from the options' `auth` at first).
    credentials: Mutex<Vec<(String, String)>>,
    /// Messages whose DATA has ended and that wait out `accept_delay`, by EHLO name.
    accepting: Mutex<HashMap<String, usize>>,
}

impl TestSmtpServer {
    /// Binds `127.0.0.1:0` and serves in a background thread. The port is bound before
    /// this returns, so a client may connect at once.
    ///
    /// # Panics
    /// When the port cannot be bound or the runtime cannot start (a broken test machine).
    pub fn start(options: TestSmtpOptions) -> Self {
        let listener = StdTcpListener::bind("127.0.0.1:0").expect("bind the test SMTP server");
        listener
            .set_nonblocking(true)
            .expect("make the test SMTP listener non-blocking");
        let address = listener
            .local_addr()
            .expect("the test SMTP server's address");
        let acceptor = (options.tls != TlsMode::None).then(self_signed_acceptor);
        let credentials = options.auth.clone().into_iter().collect();
        let shared = Arc::new(Shared {
            options,
            acceptor,
            messages: Mutex::new(Vec::new()),
            connections: AtomicUsize::new(0),
            open: AtomicUsize::new(0),
            peak_open: AtomicUsize::new(0),
            rcpt_script: Mutex::new(VecDeque::new()),
            mail_script: Mutex::new(VecDeque::new()),
            rcpt_by_address: Mutex::new(HashMap::new()),
            credentials: Mutex::new(credentials),
            accepting: Mutex::new(HashMap::new()),
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("start the test SMTP server's runtime");
        let (shutdown, stop) = oneshot::channel();
        let serving = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("test-smtp-{}", address.port()))
            .spawn(move || runtime.block_on(serve(listener, serving, stop)))
            .expect("spawn the test SMTP server thread");
        Self {
            address,
            shared,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    /// Where the server listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.address.port()
    }

    /// Every message accepted so far, oldest first.
    pub fn messages(&self) -> Vec<ReceivedMessage> {
        lock(&self.shared.messages).clone()
    }

    /// Scripts the answers to the next RCPT TOs, one line each (e.g. `450 4.2.1 slow
    /// down`, then `550 5.1.1 no such user`); once they are used up, the options'
    /// `reply_to_rcpt` (or 250) applies again. Lets one server refuse and later accept.
    pub fn script_rcpt_replies<I, S>(&self, replies: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        lock(&self.shared.rcpt_script).extend(replies.into_iter().map(Into::into));
    }

    /// Scripts the answers to the next MAIL FROMs, one line each (e.g. `550 5.7.1
    /// sender rejected`); once they are used up, MAIL FROM is answered 250 again.
    pub fn script_mail_replies<I, S>(&self, replies: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        lock(&self.shared.mail_script).extend(replies.into_iter().map(Into::into));
    }

    /// Answers every RCPT TO of `address` (any case) with `reply`, e.g. a Bcc address
    /// refused with `550 5.1.1 no such user` while the other recipients are accepted.
    /// Takes precedence over the RCPT script and the options' reply.
    pub fn refuse_recipient(&self, address: &str, reply: &str) {
        lock(&self.shared.rcpt_by_address).insert(address.to_ascii_lowercase(), reply.to_owned());
    }

    /// Replaces the valid `(user, password)` pairs: a provider that rotated a key, or
    /// several accounts sharing one relay user name with different passwords. Sessions
    /// already authenticated stay so (as on real servers).
    pub fn set_credentials<I, U, P>(&self, credentials: I)
    where
        I: IntoIterator<Item = (U, P)>,
        U: Into<String>,
        P: Into<String>,
    {
        *lock(&self.shared.credentials) = credentials
            .into_iter()
            .map(|(user, password)| (user.into(), password.into()))
            .collect();
    }

    /// How many messages were accepted so far (cheaper than `messages().len()`).
    pub fn message_count(&self) -> usize {
        lock(&self.shared.messages).len()
    }

    /// Messages from clients that introduced themselves as `hello` which are fully
    /// received and wait out [`TestSmtpOptions::accept_delay`]: the server will accept
    /// them whatever happens to the client, so a client killed now has sent them without
    /// learning it.
    pub fn in_flight(&self, hello: &str) -> usize {
        lock(&self.shared.accepting)
            .get(hello)
            .copied()
            .unwrap_or(0)
    }

    /// How many TCP connections were accepted (egress tests assert 0).
    pub fn connection_count(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// The most connections that were open at the same time.
    pub fn peak_open_connections(&self) -> usize {
        self.shared.peak_open.load(Ordering::SeqCst)
    }
}

impl Drop for TestSmtpServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A poisoned lock only means another test thread panicked; the list is still good.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A fresh self-signed certificate for `localhost` per server: nothing to ship or expire.
fn self_signed_acceptor() -> TlsAcceptor {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
        .expect("generate a self-signed certificate");
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    // The provider is named, not taken from the process default, so it works whichever
    // rustls providers other crates in the test binary enable.
    let config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("TLS protocol versions")
            .with_no_client_auth()
            .with_single_cert(vec![certified.cert.der().clone()], key)
            .expect("TLS server configuration");
    TlsAcceptor::from(Arc::new(config))
}

async fn serve(listener: StdTcpListener, shared: Arc<Shared>, mut stop: oneshot::Receiver<()>) {
    let listener = TcpListener::from_std(listener).expect("hand the listener to tokio");
    loop {
        tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => {
                // An accept error (e.g. out of file descriptors) is not the client's
                // fault; keep serving.
                let Ok((stream, _)) = accepted else { continue };
                shared.connections.fetch_add(1, Ordering::SeqCst);
                let open = shared.open.fetch_add(1, Ordering::SeqCst) + 1;
                shared.peak_open.fetch_max(open, Ordering::SeqCst);
                let shared = Arc::clone(&shared);
                tokio::spawn(async move {
                    // Errors just end the connection, as a client hanging up would.
                    let _ = run_connection(stream, &shared).await;
                    shared.open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        }
    }
}

async fn run_connection(stream: TcpStream, shared: &Shared) -> io::Result<()> {
    let acceptor = shared.acceptor.clone();
    match (shared.options.tls, acceptor) {
        (TlsMode::Implicit, Some(acceptor)) => {
            let stream = acceptor.accept(stream).await?;
            session(stream, shared, true, true).await?;
        }
        (_, acceptor) => {
            if let Some(plain) = session(stream, shared, false, true).await? {
                let acceptor = acceptor.ok_or_else(|| io::Error::other("no TLS acceptor"))?;
                let stream = acceptor.accept(plain).await?;
                // No second greeting: the client speaks first (EHLO) after STARTTLS.
                session(stream, shared, true, false).await?;
            }
        }
    }
    Ok(())
}

/// Per-connection SMTP state. STARTTLS starts a new one (RFC 3207 §4.2: forget
/// everything learned in plaintext).
#[derive(Default)]
struct State {
    secured: bool,
    hello: bool,
    hello_name: String,
    user: Option<String>,
    password: Option<String>,
    from: Option<String>,
    recipients: Vec<String>,
    /// More commands were waiting when `MAIL FROM` was read.
    pipelined: bool,
}

/// Runs the command loop. Returns the stream when the client asked for STARTTLS, so the
/// caller can wrap it in TLS and start over.
async fn session<S>(stream: S, shared: &Shared, secured: bool, greet: bool) -> io::Result<Option<S>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let options = &shared.options;
    let offers_auth = options.auth.is_some() || options.refuse_auth;
    let offers_starttls = options.tls == TlsMode::StartTls && !secured;
    let mut io = BufReader::new(stream);
    let mut state = State {
        secured,
        ..State::default()
    };
    if greet {
        reply(&mut io, "220 localhost ESMTP Mailroom test server").await?;
    }
    loop {
        let line = match options.idle_disconnect {
            None => read_line(&mut io).await?,
            Some(limit) => match tokio::time::timeout(limit, read_line(&mut io)).await {
                Ok(line) => line?,
                Err(_) => {
                    reply(&mut io, "421 4.4.2 localhost Error: timeout exceeded").await?;
                    let _ = io.shutdown().await;
                    return Ok(None);
                }
            },
        };
        let Some(line) = line else { break };
        let line = String::from_utf8_lossy(&line).into_owned();
        let (verb, argument) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        match verb.to_ascii_uppercase().as_str() {
            "EHLO" => {
                state.hello = true;
                argument.trim().clone_into(&mut state.hello_name);
                state.from = None;
                state.recipients.clear();
                let mut lines = vec![
                    format!("250-localhost greets {argument}"),
                    "250-8BITMIME".to_owned(),
                    "250-SMTPUTF8".to_owned(),
                ];
                if offers_starttls {
                    lines.push("250-STARTTLS".to_owned());
                }
                if offers_auth {
                    lines.push("250-AUTH PLAIN LOGIN".to_owned());
                }
                if !options.no_pipelining {
                    lines.push("250-PIPELINING".to_owned());
                }
                lines.push("250 ENHANCEDSTATUSCODES".to_owned());
                reply(&mut io, &lines.join("\r\n")).await?;
            }
            "HELO" => {
                state.hello = true;
                argument.trim().clone_into(&mut state.hello_name);
                reply(&mut io, "250 localhost").await?;
            }
            "STARTTLS" if offers_starttls => {
                reply(&mut io, "220 2.0.0 Ready to start TLS").await?;
                // Anything the client pipelined after STARTTLS is dropped with the buffer
                // (the plaintext command injection of CVE-2011-0411).
                return Ok(Some(io.into_inner()));
            }
            "AUTH" if !offers_auth => reply(&mut io, "503 5.5.1 AUTH not advertised").await?,
            "AUTH" if state.user.is_some() => {
                reply(&mut io, "503 5.5.1 Already authenticated").await?;
            }
            "AUTH" => authenticate(&mut io, shared, &mut state, argument).await?,
            "MAIL" if !state.hello => reply(&mut io, "503 5.5.1 Say EHLO first").await?,
            "MAIL" if options.auth.is_some() && state.user.is_none() => {
                reply(&mut io, "530 5.7.0 Authentication required").await?;
            }
            "MAIL" if state.from.is_some() => {
                reply(&mut io, "503 5.5.1 Sender already given").await?;
            }
            "MAIL" => {
                let scripted = lock(&shared.mail_script).pop_front();
                let answer = scripted.unwrap_or_else(|| "250 2.1.0 Sender OK".to_owned());
                if answer.starts_with('2') {
                    state.from = Some(path(argument, "FROM:"));
                    state.pipelined = !io.buffer().is_empty();
                }
                reply(&mut io, &answer).await?;
            }
            "RCPT" if state.from.is_none() => reply(&mut io, "503 5.5.1 Need MAIL first").await?,
            "RCPT" => {
                let recipient = path(argument, "TO:");
                let by_address = lock(&shared.rcpt_by_address)
                    .get(&recipient.to_ascii_lowercase())
                    .cloned();
                let scripted = by_address.or_else(|| lock(&shared.rcpt_script).pop_front());
                let answer = scripted.unwrap_or_else(|| {
                    options
                        .reply_to_rcpt
                        .clone()
                        .unwrap_or_else(|| "250 2.1.5 Recipient OK".to_owned())
                });
                if answer.starts_with('2') {
                    state.recipients.push(recipient);
                }
                reply(&mut io, &answer).await?;
            }
            "DATA" if state.from.is_none() => reply(&mut io, "503 5.5.1 Need MAIL first").await?,
            "DATA" if state.recipients.is_empty() => {
                reply(&mut io, "554 5.5.1 No valid recipients").await?;
            }
            "DATA" => {
                reply(&mut io, "354 End data with <CR><LF>.<CR><LF>").await?;
                let Some(data) = read_data(&mut io).await? else {
                    return Ok(None);
                };
                if let Some(delay) = options.accept_delay {
                    *lock(&shared.accepting)
                        .entry(state.hello_name.clone())
                        .or_default() += 1;
                    tokio::time::sleep(delay).await;
                }
                // The lock lives in this block only: never across an await.
                let answer = {
                    let mut messages = lock(&shared.messages);
                    let queued = format!("250 2.0.0 Ok: queued as {}", messages.len() + 1);
                    let answer = options.reply_to_data.clone().unwrap_or(queued);
                    if answer.starts_with('2') {
                        messages.push(ReceivedMessage {
                            from: state.from.take().unwrap_or_default(),
                            recipients: std::mem::take(&mut state.recipients),
                            data: String::from_utf8_lossy(&data).into_owned(),
                            authenticated_as: state.user.clone(),
                            authenticated_with: state.password.clone(),
                            tls: state.secured,
                            hello: state.hello_name.clone(),
                            pipelined: state.pipelined,
                        });
                    }
                    if options.accept_delay.is_some() {
                        if let Some(waiting) = lock(&shared.accepting).get_mut(&state.hello_name) {
                            *waiting -= 1;
                        }
                    }
                    answer
                };
                state.from = None;
                state.recipients.clear();
                reply(&mut io, &answer).await?;
            }
            "RSET" => {
                state.from = None;
                state.recipients.clear();
                reply(&mut io, "250 2.0.0 OK").await?;
            }
            "NOOP" => reply(&mut io, "250 2.0.0 OK").await?,
            "QUIT" => {
                reply(&mut io, "221 2.0.0 Bye").await?;
                // Sends TLS close_notify where there is TLS.
                let _ = io.shutdown().await;
                return Ok(None);
            }
            _ => reply(&mut io, "500 5.5.2 Command not recognized").await?,
        }
    }
    Ok(None)
}

/// AUTH PLAIN (initial response inline or after `334 `) and AUTH LOGIN (RFC 4616, and the
/// de-facto LOGIN exchange with base64 "Username:" / "Password:" prompts).
async fn authenticate<S>(
    io: &mut BufReader<S>,
    shared: &Shared,
    state: &mut State,
    argument: &str,
) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut words = argument.split_whitespace();
    let mechanism = words.next().unwrap_or_default().to_ascii_uppercase();
    let initial = words.next().map(str::to_owned);
    let answers = match mechanism.as_str() {
        "PLAIN" => match challenge(io, initial, "334 ").await? {
            Some(encoded) => vec![encoded],
            None => return Ok(()),
        },
        "LOGIN" => {
            let Some(user) = challenge(io, initial, "334 VXNlcm5hbWU6").await? else {
                return Ok(());
            };
            let Some(password) = challenge(io, None, "334 UGFzc3dvcmQ6").await? else {
                return Ok(());
            };
            vec![user, password]
        }
        _ => return reply(io, "504 5.5.4 Unrecognized authentication type").await,
    };
    if answers.iter().any(|answer| answer == "*") {
        return reply(io, "501 5.7.0 Authentication cancelled").await;
    }
    // `=` is the empty initial response (RFC 4954 §4).
    let decoded: Option<Vec<String>> = answers
        .iter()
        .map(|answer| match answer.as_str() {
            "=" => Some(String::new()),
            _ => BASE64
                .decode(answer)
                .ok()
                .and_then(|bytes| String::from_utf8(bytes).ok()),
        })
        .collect();
    let Some(decoded) = decoded else {
        return reply(io, "501 5.5.2 Cannot decode response").await;
    };
    let given = match decoded.as_slice() {
        // authzid NUL authcid NUL passwd
        [plain] => plain
            .split('\0')
            .skip(1)
            .collect::<Vec<_>>()
            .try_into()
            .ok()
            .map(|[user, password]: [&str; 2]| (user.to_owned(), password.to_owned())),
        [user, password] => Some((user.clone(), password.clone())),
        _ => None,
    };
    let valid = |given: &(String, String)| lock(&shared.credentials).contains(given);
    match given {
        Some(given) if !shared.options.refuse_auth && valid(&given) => {
            state.user = Some(given.0);
            state.password = Some(given.1);
            reply(io, "235 2.7.0 Authentication successful").await
        }
        _ => reply(io, "535 5.7.8 Authentication credentials invalid").await,
    }
}

/// The client's answer: the initial response if it sent one, else the next line after
/// `prompt`. `None` when the client hung up.
async fn challenge<S>(
    io: &mut BufReader<S>,
    initial: Option<String>,
    prompt: &str,
) -> io::Result<Option<String>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    if initial.is_some() {
        return Ok(initial);
    }
    reply(io, prompt).await?;
    let line = read_line(io).await?;
    Ok(line.map(|bytes| String::from_utf8_lossy(&bytes).trim().to_owned()))
}

/// The mailbox in `FROM:<a@b> BODY=8BITMIME` (or `TO:<…>`), without brackets.
fn path(argument: &str, keyword: &str) -> String {
    let rest = match argument.get(..keyword.len()) {
        Some(head) if head.eq_ignore_ascii_case(keyword) => &argument[keyword.len()..],
        _ => argument,
    };
    let rest = rest.trim_start();
    match (rest.find('<'), rest.find('>')) {
        (Some(open), Some(close)) if open < close => rest[open + 1..close].to_owned(),
        _ => rest
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_owned(),
    }
}

/// DATA until a line that is a lone `.`; a leading `..` loses one dot (RFC 5321 §4.5.2).
/// `None` when the client hung up first.
async fn read_data<S>(io: &mut BufReader<S>) -> io::Result<Option<Vec<u8>>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut data = Vec::new();
    while let Some(line) = read_line(io).await? {
        if line == b"." {
            return Ok(Some(data));
        }
        let unstuffed = line.strip_prefix(b".").unwrap_or(&line);
        data.extend_from_slice(unstuffed);
        data.extend_from_slice(b"\r\n");
    }
    Ok(None)
}

/// One line without its CRLF (a bare LF is accepted too); `None` at end of stream.
async fn read_line<S>(io: &mut BufReader<S>) -> io::Result<Option<Vec<u8>>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut line = Vec::new();
    if io.read_until(b'\n', &mut line).await? == 0 {
        return Ok(None);
    }
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
    Ok(Some(line))
}

async fn reply<S>(io: &mut BufReader<S>, text: &str) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    // One write per reply: two small writes would wait on the client's delayed ACK
    // (Nagle), about 40 ms per command.
    let mut line = Vec::with_capacity(text.len() + 2);
    line.extend_from_slice(text.as_bytes());
    line.extend_from_slice(b"\r\n");
    io.write_all(&line).await?;
    io.flush().await
}
