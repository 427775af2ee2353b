//! `MailServerProbe` over lettre's blocking SMTP client.

use std::error::Error as _;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{SmtpConnection, TlsParameters};
use lettre::transport::smtp::commands::Ehlo;
use lettre::transport::smtp::extension::ClientId;
use lettre::transport::smtp::Error as SmtpError;
use mailroom_app::ports::{
    CredentialCheck, MailServerProbe, ProbeError, SmtpEndpoint, SmtpSecurity,
};

use crate::resolve::resolve_pinned;

/// How long each step (resolution, connect, every reply) may take when nothing else is
/// configured.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The mechanisms Mailroom speaks, in order of preference.
const MECHANISMS: [Mechanism; 2] = [Mechanism::Plain, Mechanism::Login];

/// Operator settings of [`SmtpProbe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeSettings {
    /// Let connections reach private, loopback and link-local addresses
    /// (`MAILROOM_ALLOW_PRIVATE_EGRESS`). Off in production; tests on loopback need it.
    pub allow_private_egress: bool,
    /// Bound on each step: resolution, TCP connect, and every server reply.
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
/// when AUTH is advertised, quit. Blocking; run it off the async executor.
#[derive(Debug, Clone)]
pub struct SmtpProbe {
    settings: ProbeSettings,
}

impl SmtpProbe {
    /// A probe with these settings.
    pub fn new(settings: ProbeSettings) -> Self {
        Self { settings }
    }
}

impl MailServerProbe for SmtpProbe {
    fn verify(&self, endpoint: &SmtpEndpoint) -> Result<CredentialCheck, ProbeError> {
        let timeout = self.settings.timeout;
        let address = resolve_pinned(
            &endpoint.host,
            endpoint.port,
            self.settings.allow_private_egress,
            timeout,
        )?;
        let check = Check {
            endpoint,
            address,
            timeout,
            // Without lettre's `hostname` feature this is the address literal
            // `[127.0.0.1]`, which RFC 5321 allows when the client has no obvious name.
            client_id: ClientId::default(),
        };
        let mut connection = check.connect()?;
        match check.converse(&mut connection) {
            Ok(outcome) => {
                // The check is settled; a server that hangs up without answering QUIT
                // does not undo it.
                let _ = connection.quit();
                Ok(outcome)
            }
            Err(error) => {
                connection.abort();
                Err(error)
            }
        }
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
    client_id: ClientId,
}

impl Check<'_> {
    /// TCP (and TLS for implicit TLS) to the pinned address, greeting and EHLO.
    fn connect(&self) -> Result<SmtpConnection, ProbeError> {
        let tls = match self.endpoint.security {
            SmtpSecurity::ImplicitTls => Some(self.tls_parameters()?),
            SmtpSecurity::StartTlsRequired | SmtpSecurity::StartTlsOpportunistic => None,
        };
        // A `SocketAddr` is its own `ToSocketAddrs`: lettre does not resolve again.
        SmtpConnection::connect(
            self.address,
            Some(self.timeout),
            &self.client_id,
            tls.as_ref(),
            None,
        )
        .map_err(|error| self.classify(Step::Connect, &error))
    }

    /// STARTTLS as the mode asks, then AUTH when advertised.
    fn converse(&self, connection: &mut SmtpConnection) -> Result<CredentialCheck, ProbeError> {
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
            connection
                .starttls(&tls, &self.client_id)
                .map_err(|error| self.classify(Step::StartTls, &error))?;
        }

        let info = connection.server_info();
        if !MECHANISMS.iter().any(|&m| info.supports_auth_mechanism(m)) {
            return self.without_auth(connection);
        }
        let credentials = Credentials::new(
            self.endpoint.user.clone(),
            self.endpoint.password.expose().to_owned(),
        );
        connection
            .auth(&MECHANISMS, &credentials)
            .map_err(|error| self.classify(Step::Auth, &error))?;
        Ok(CredentialCheck::Authenticated)
    }

    /// No PLAIN or LOGIN in the EHLO reply. lettre's `ServerInfo` keeps only the
    /// mechanisms it knows, so one more EHLO reads the raw lines: a server that offers
    /// only, say, CRAM-MD5 requires AUTH that Mailroom cannot do, which is not the same
    /// as a relay without AUTH.
    fn without_auth(&self, connection: &mut SmtpConnection) -> Result<CredentialCheck, ProbeError> {
        let reply = connection
            .command(Ehlo::new(self.client_id.clone()))
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
        let host = self.endpoint.host.trim();
        let host = host
            .strip_prefix('[')
            .and_then(|inner| inner.strip_suffix(']'))
            .unwrap_or(host);
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
            return ProbeError::Tls(format!("{tls}{hint}"));
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
