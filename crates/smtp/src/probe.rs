//! `MailServerProbe` over lettre's async SMTP client, on a connection Mailroom dials itself
//! with its replies bounded ([`crate::bounded`]), driven to completion on the calling
//! thread within one overall deadline.

use std::error::Error as _;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{AsyncSmtpConnection, TlsParameters};
use lettre::transport::smtp::commands::Ehlo;
use lettre::transport::smtp::extension::ClientId;
use lettre::transport::smtp::Error as SmtpError;
use mailroom_app::ports::{
    CredentialCheck, MailServerProbe, ProbeError, SmtpEndpoint, SmtpSecurity,
};

use tokio::net::TcpStream;
use tokio::time::{timeout_at, Instant};

use crate::bounded::{bounded, ReplyTooLong};
use crate::implicit_tls::ImplicitTlsStream;
use crate::resolve::resolve_pinned;
use mailroom_dns::DnsResolver;

/// How long each step (resolution, connect, every exchange) may take when nothing else is
/// configured.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a whole check may take, all steps together, whatever the step timeout: a
/// server that answers each step just in time (or drips a byte a second) still cannot
/// hold the API request and its thread longer than this.
pub const PROBE_DEADLINE: Duration = Duration::from_secs(30);

/// The mechanisms Mailroom speaks, in order of preference.
const MECHANISMS: [Mechanism; 2] = [Mechanism::Plain, Mechanism::Login];

/// Operator settings of [`SmtpProbe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeSettings {
    /// Let connections reach private, loopback and link-local addresses
    /// (`MAILROOM_ALLOW_PRIVATE_EGRESS`). Off in production; tests on loopback need it.
    pub allow_private_egress: bool,
    /// Bound on each step: resolution, TCP connect and TLS, and every exchange with the
    /// server. The whole check is bounded by [`PROBE_DEADLINE`] as well.
    pub timeout: Duration,
}

impl Default for ProbeSettings {
    fn default() -> Self {
        Self {
            allow_private_egress: false,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// Checks mail-server settings and credentials over SMTP: resolve once through the egress
/// guard, connect to the checked address, secure the connection as asked, authenticate
/// when AUTH is advertised, quit. Blocking (it drives its own single-threaded runtime);
/// run it off the async executor.
#[derive(Debug, Clone)]
pub struct SmtpProbe {
    settings: ProbeSettings,
    resolver: DnsResolver,
}

impl SmtpProbe {
    /// A probe with these settings, resolving with the process's default resolver.
    pub fn new(settings: ProbeSettings) -> Self {
        Self {
            settings,
            resolver: DnsResolver::process_default(),
        }
    }

    /// The same probe resolving hosts with `resolver` (the server's shared one).
    #[must_use]
    pub fn with_resolver(mut self, resolver: DnsResolver) -> Self {
        self.resolver = resolver;
        self
    }
}

impl MailServerProbe for SmtpProbe {
    fn verify(&self, endpoint: &SmtpEndpoint) -> Result<CredentialCheck, ProbeError> {
        let started = std::time::Instant::now();
        let deadline = PROBE_DEADLINE;
        let timeout = self.settings.timeout.min(deadline);
        let address = resolve_pinned(
            &self.resolver,
            &endpoint.host,
            endpoint.port,
            self.settings.allow_private_egress,
        )?;
        let remaining = deadline.saturating_sub(started.elapsed());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| ProbeError::Connect(format!("probe runtime: {error}")))?;
        runtime.block_on(async {
            let check = Check {
                endpoint,
                address,
                timeout,
                deadline: Instant::now() + remaining,
                // Without lettre's `hostname` feature this is the address literal
                // `[127.0.0.1]`, which RFC 5321 allows when the client has no obvious name.
                client_id: ClientId::default(),
            };
            check.run().await
        })
    }
}

/// Which step failed decides what a negative reply means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// TCP connect, implicit TLS, greeting, EHLO.
    Connect,
    /// STARTTLS, the handshake after it, and the second EHLO.
    StartTls,
    /// AUTH.
    Auth,
}

/// One verification in progress.
struct Check<'a> {
    endpoint: &'a SmtpEndpoint,
    address: SocketAddr,
    timeout: Duration,
    /// The end of the whole check.
    deadline: Instant,
    client_id: ClientId,
}

impl Check<'_> {
    async fn run(&self) -> Result<CredentialCheck, ProbeError> {
        let mut connection = self.connect().await?;
        match self.converse(&mut connection).await {
            Ok(outcome) => {
                // The check is settled; a server that hangs up without answering QUIT
                // does not undo it.
                let _ = self.step(connection.quit()).await;
                Ok(outcome)
            }
            // After a failed STARTTLS handshake lettre has no stream left to say QUIT on
            // (it asserts in debug builds); the connection is dropped instead.
            Err(error @ ProbeError::Tls(_)) => Err(error),
            Err(error) => {
                let _ = self.step(connection.abort()).await;
                Err(error)
            }
        }
    }

    /// `future` within the step timeout and the overall deadline, whichever ends first.
    async fn step<T>(&self, future: impl Future<Output = T>) -> Result<T, ProbeError> {
        let step_end = Instant::now() + self.timeout;
        let end = step_end.min(self.deadline);
        timeout_at(end, future).await.map_err(|_| {
            let limit = if end == self.deadline {
                format!("the check's deadline of {} s", PROBE_DEADLINE.as_secs())
            } else {
                format!("{} s", self.timeout.as_secs_f32())
            };
            ProbeError::Timeout(format!("{} did not answer within {limit}", self.address))
        })
    }

    /// TCP (and TLS for implicit TLS) to the pinned address, greeting and EHLO.
    async fn connect(&self) -> Result<AsyncSmtpConnection, ProbeError> {
        let stream = self
            .step(TcpStream::connect(self.address))
            .await?
            .map_err(|error| self.classify_io(&error))?;
        let connected = match self.endpoint.security {
            SmtpSecurity::ImplicitTls => {
                let tls = self
                    .step(ImplicitTlsStream::handshake(
                        stream,
                        tls_host(self.endpoint),
                        self.endpoint.allow_insecure_tls,
                    ))
                    .await?
                    .map_err(|error| self.classify_tls_io(&error))?;
                self.step(AsyncSmtpConnection::connect_with_transport(
                    bounded(tls),
                    &self.client_id,
                ))
                .await?
            }
            SmtpSecurity::StartTlsRequired | SmtpSecurity::StartTlsOpportunistic => {
                self.step(AsyncSmtpConnection::connect_with_transport(
                    bounded(stream),
                    &self.client_id,
                ))
                .await?
            }
        };
        connected.map_err(|error| self.classify(Step::Connect, &error))
    }

    /// STARTTLS as the mode asks, then AUTH when advertised.
    async fn converse(
        &self,
        connection: &mut AsyncSmtpConnection,
    ) -> Result<CredentialCheck, ProbeError> {
        let offers_starttls = connection.can_starttls();
        let upgrade = match self.endpoint.security {
            SmtpSecurity::ImplicitTls => false,
            SmtpSecurity::StartTlsRequired if !offers_starttls => {
                return Err(ProbeError::Tls(
                    "the server does not offer STARTTLS".to_owned(),
                ));
            }
            SmtpSecurity::StartTlsRequired => true,
            // A failed upgrade is reported, never retried in plaintext: falling back is
            // exactly what a downgrade attacker wants.
            SmtpSecurity::StartTlsOpportunistic => offers_starttls,
        };
        if upgrade {
            let tls = self.tls_parameters()?;
            self.step(connection.starttls(tls, &self.client_id))
                .await?
                .map_err(|error| self.classify(Step::StartTls, &error))?;
        }

        let info = connection.server_info();
        if !MECHANISMS.iter().any(|&m| info.supports_auth_mechanism(m)) {
            return self.without_auth(connection).await;
        }
        let credentials = Credentials::new(
            self.endpoint.user.clone(),
            self.endpoint.password.expose().to_owned(),
        );
        self.step(connection.auth(&MECHANISMS, &credentials))
            .await?
            .map_err(|error| self.classify(Step::Auth, &error))?;
        let encrypted = upgrade || self.endpoint.security == SmtpSecurity::ImplicitTls;
        Ok(if encrypted {
            CredentialCheck::Authenticated
        } else {
            CredentialCheck::AuthenticatedInClear
        })
    }

    /// No PLAIN or LOGIN in the EHLO reply. lettre's `ServerInfo` keeps only the
    /// mechanisms it knows, so one more EHLO reads the raw lines: a server that offers
    /// only, say, CRAM-MD5 requires AUTH that Mailroom cannot do, which is not the same
    /// as a relay without AUTH.
    async fn without_auth(
        &self,
        connection: &mut AsyncSmtpConnection,
    ) -> Result<CredentialCheck, ProbeError> {
        let reply = self
            .step(connection.command(Ehlo::new(self.client_id.clone())))
            .await?
            .map_err(|error| self.classify(Step::Connect, &error))?;
        let offered = reply.message().find_map(|line| {
            let keyword = line.get(..4)?;
            let rest = &line[4..];
            (keyword.eq_ignore_ascii_case("AUTH") && (rest.starts_with([' ', '='])))
                .then(|| rest[1..].trim().to_owned())
        });
        match offered {
            Some(mechanisms) => Err(ProbeError::Protocol(format!(
                "the server offers AUTH {mechanisms}; Mailroom supports PLAIN and LOGIN"
            ))),
            None => Ok(CredentialCheck::NoAuthAdvertised),
        }
    }

    /// TLS that verifies the certificate against the host *name* the caller gave (the
    /// address is pinned, the identity is not), unless insecure TLS was asked for.
    fn tls_parameters(&self) -> Result<TlsParameters, ProbeError> {
        let host = tls_host(self.endpoint);
        let insecure = self.endpoint.allow_insecure_tls;
        TlsParameters::builder(host.to_owned())
            .dangerous_accept_invalid_certs(insecure)
            .dangerous_accept_invalid_hostnames(insecure)
            .build_rustls()
            .map_err(|error| ProbeError::Tls(describe(&error)))
    }

    /// Maps a lettre error to the port's error, keeping the server's reply where there is
    /// one (`535 5.7.8 Authentication credentials invalid`).
    fn classify(&self, step: Step, error: &SmtpError) -> ProbeError {
        if let Some(too_long) = find_cause::<ReplyTooLong>(error) {
            return ProbeError::Protocol(too_long.to_string());
        }
        if let Some(code) = error.status() {
            let reply = match error.source() {
                Some(text) => format!("{code} {text}"),
                None => code.to_string(),
            };
            return match step {
                Step::Auth if error.is_permanent() => ProbeError::AuthRefused(reply),
                Step::StartTls => ProbeError::Tls(format!("STARTTLS failed: {reply}")),
                Step::Auth | Step::Connect => ProbeError::Protocol(reply),
            };
        }
        if let Some(tls) = find_cause::<rustls::Error>(error) {
            return self.tls_error(tls);
        }
        if error.is_tls() {
            return ProbeError::Tls(describe(error));
        }
        // Read and write time-outs surface as `WouldBlock` on Unix, connect time-outs as
        // `TimedOut`.
        if find_cause::<io::Error>(error).is_some_and(|io| {
            matches!(
                io.kind(),
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
            )
        }) {
            return ProbeError::Timeout(format!(
                "{} did not answer within {} s",
                self.address,
                self.timeout.as_secs_f32()
            ));
        }
        match step {
            // lettre reports failures to set up the TLS session as connection errors.
            Step::StartTls => ProbeError::Tls(describe(error)),
            _ if error.is_response() || error.is_client() => ProbeError::Protocol(describe(error)),
            _ => ProbeError::Connect(format!("{}: {}", self.address, describe(error))),
        }
    }
}

impl Check<'_> {
    /// A rustls error, with a hint at the usual causes.
    fn tls_error(&self, tls: &rustls::Error) -> ProbeError {
        let hint = match tls {
            rustls::Error::InvalidCertificate(_) if !self.endpoint.allow_insecure_tls => {
                " (a self-signed certificate, or one for another name, needs \
                 allowInsecureTLS)"
            }
            rustls::Error::InvalidMessage(_)
                if self.endpoint.security == SmtpSecurity::ImplicitTls =>
            {
                " (the server did not answer in TLS: does this port expect STARTTLS, \
                 that is secure: false?)"
            }
            _ => "",
        };
        ProbeError::Tls(format!("{tls}{hint}"))
    }

    /// A failed TCP connect.
    fn classify_io(&self, error: &io::Error) -> ProbeError {
        match error.kind() {
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => ProbeError::Timeout(format!(
                "{} did not answer within {} s",
                self.address,
                self.timeout.as_secs_f32()
            )),
            _ => ProbeError::Connect(format!("{}: {error}", self.address)),
        }
    }

    /// A failed implicit-TLS handshake (tokio-rustls carries rustls' error in the
    /// `io::Error`).
    fn classify_tls_io(&self, error: &io::Error) -> ProbeError {
        match error
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            Some(tls) => self.tls_error(tls),
            None if error.kind() == io::ErrorKind::InvalidData => ProbeError::Tls(format!(
                "{error} (the server did not answer in TLS: does this port expect STARTTLS, \
                 that is secure: false?)"
            )),
            None => ProbeError::Tls(error.to_string()),
        }
    }
}

/// The name TLS verifies the certificate against: the configured host (the address is
/// pinned, the identity is not), without IPv6 brackets.
fn tls_host(endpoint: &SmtpEndpoint) -> &str {
    let host = endpoint.host.trim();
    host.strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .unwrap_or(host)
}

/// The innermost useful text: lettre's own prefix ("Connection error: …") says less than
/// its cause.
fn describe(error: &SmtpError) -> String {
    error
        .source()
        .map_or_else(|| error.to_string(), ToString::to_string)
}

/// The first `T` in the error's cause chain, looking inside `io::Error`s too (rustls'
/// errors travel wrapped in one).
fn find_cause<T: std::error::Error + 'static>(error: &SmtpError) -> Option<&T> {
    let mut cause = error.source();
    while let Some(current) = cause {
        if let Some(found) = current.downcast_ref::<T>() {
            return Some(found);
        }
        if let Some(inner) = current
            .downcast_ref::<io::Error>()
            .and_then(io::Error::get_ref)
        {
            if let Some(found) = inner.downcast_ref::<T>() {
                return Some(found);
            }
        }
        cause = current.source();
    }
    None
}
