use mailroom_domain::{secret::SecretString, AccountId, MailServerId, Timestamp};

/// How the connection to a mail server is secured. `secure` and `requireTLS` of the API
/// choose it; the port number never does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpSecurity {
    /// TLS from the first byte (`secure: true`).
    ImplicitTls,
    /// Plaintext, then STARTTLS; a server that does not offer it is refused
    /// (`secure: false, requireTLS: true`).
    StartTlsRequired,
    /// Plaintext, upgraded with STARTTLS when the server offers it (both false).
    StartTlsOpportunistic,
}

/// Everything needed to reach and authenticate against a mail server.
#[derive(Debug, Clone)]
pub struct SmtpEndpoint {
    /// Host name or IP literal (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// TLS mode.
    pub security: SmtpSecurity,
    /// Skip certificate verification (self-signed or bare-IP servers). Never lifts the
    /// egress guard.
    pub allow_insecure_tls: bool,
    /// SMTP username.
    pub user: String,
    /// SMTP password.
    pub password: SecretString,
    /// The saved mail server these settings are, when they are one (delivery); `None`
    /// for settings being checked before they are saved (the probe).
    pub saved: Option<SavedServer>,
}

/// A saved mail server behind an [`SmtpEndpoint`]: SMTP sessions are never shared across
/// accounts or servers, and a newer version of a server's settings retires the sessions
/// opened with an older one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SavedServer {
    /// The account that owns the server.
    pub account_id: AccountId,
    /// The server.
    pub id: MailServerId,
    /// When its settings were last saved: the version of the settings.
    pub updated_at: Timestamp,
}

/// What a successful check established.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialCheck {
    /// The server advertised AUTH and accepted the credentials over an encrypted
    /// connection (implicit TLS or STARTTLS).
    Authenticated,
    /// The server advertised AUTH without offering STARTTLS, and accepted the credentials
    /// sent over the plain connection (`requireTLS: false`): anyone on the path could
    /// read the password, and every send will do the same.
    AuthenticatedInClear,
    /// The server advertised no AUTH mechanism (an internal relay): credentials could not
    /// be checked and sends will go without AUTH.
    NoAuthAdvertised,
}

/// Why a mail server check failed. Every variant is the client's to fix (a 400 whose
/// detail carries this text, including the server's own reply where there is one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    /// The egress guard refused every or some resolved address (private, loopback, …).
    #[error("the mail server address is not allowed: {0}")]
    EgressRefused(String),
    /// The host name did not resolve.
    #[error("the mail server host could not be resolved: {0}")]
    Resolve(String),
    /// TCP connection failed.
    #[error("could not connect to the mail server: {0}")]
    Connect(String),
    /// The TLS handshake or certificate check failed, or STARTTLS was required but not offered.
    #[error("TLS with the mail server failed: {0}")]
    Tls(String),
    /// The server advertised AUTH and refused the credentials; carries its reply.
    #[error("the mail server refused the credentials: {0}")]
    AuthRefused(String),
    /// Any other unexpected reply; carries it.
    #[error("the mail server answered unexpectedly: {0}")]
    Protocol(String),
    /// No answer in time.
    #[error("the mail server did not answer in time: {0}")]
    Timeout(String),
}

/// Checks a mail server's connection settings and credentials.
pub trait MailServerProbe: Send + Sync {
    /// Resolves the host through the egress guard, connects to the checked address (TLS
    /// still verifies the host name), says EHLO, secures the connection as asked,
    /// authenticates when AUTH is advertised, and quits. Blocking, with bounded timeouts;
    /// never call it inside a database transaction.
    ///
    /// # Errors
    /// [`ProbeError`] naming what failed.
    fn verify(&self, endpoint: &SmtpEndpoint) -> Result<CredentialCheck, ProbeError>;
}
