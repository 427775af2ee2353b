//! TLS for the queue's `LISTEN` connection, chosen from the database URL the way libpq
//! (which the pool connects with, through diesel) chooses it, so the listener is never
//! less protected than the pool (docs/operations.md, "Waking the workers: LISTEN/NOTIFY").
//!
//! tokio-postgres knows `sslmode` `disable`, `prefer` and `require` only, verifies nothing
//! itself and refuses the URL of any other libpq TLS setting, so the URL's TLS settings
//! are read here and taken out before tokio-postgres reads the rest:
//!
//! | `sslmode` (URL, else `PGSSLMODE`, else `prefer`) | the listener |
//! |---|---|
//! | `disable` | no TLS |
//! | `allow`, `prefer` | TLS when the server offers it, else none (`allow` tries TLS first, where libpq tries without) |
//! | `require` | TLS or no connection |
//! | `verify-ca` | TLS, the server's chain checked against the root certificates |
//! | `verify-full` | as `verify-ca`, and the certificate must name the host |
//!
//! Root certificates come from `sslrootcert` (URL, else `PGSSLROOTCERT`, else
//! `~/.postgresql/root.crt`, as libpq), a PEM file, or `system` (the Mozilla roots compiled
//! in). As in libpq, `require` with a root file that exists checks the chain as
//! `verify-ca` does. Client certificates (`sslcert`, `sslkey`) are not supported: a URL
//! that names one makes the listener refuse to start, with the reason in the log, and the
//! workers poll (they would otherwise connect with less than the pool presents).

use std::{
    future::Future,
    io,
    path::{Path, PathBuf},
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::{
    config::SslMode as ClientSslMode,
    tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream},
};
use tokio_rustls::rustls::{
    self,
    client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    crypto::CryptoProvider,
    pki_types::{pem::PemObject, CertificateDer, ServerName, UnixTime},
    DigitallySignedStruct, RootCertStore, SignatureScheme,
};

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(text: &str) -> Result<Self, String> {
        Ok(match text {
            "disable" => Self::Disable,
            "allow" => Self::Allow,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            other => return Err(format!("sslmode {other:?} is not one libpq knows")),
        })
    }
}

/// How the server's certificate is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verification {
    /// Not at all (`prefer`, `require` without a root file): encrypted, not authenticated.
    None,
    /// The chain against these roots; with `host`, the certificate must also name it.
    Chain { roots: RootSource, host: bool },
}

/// Where the root certificates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RootSource {
    /// A PEM file.
    File(PathBuf),
    /// `sslrootcert=system`: the Mozilla roots compiled in (webpki-roots).
    System,
}

/// What the listener connects with: the URL without its TLS settings (for
/// tokio-postgres), the mode tokio-postgres applies, and how the certificate is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListenerTls {
    pub(crate) url: String,
    pub(crate) mode: SslMode,
    pub(crate) verification: Verification,
}

impl ListenerTls {
    /// The mode tokio-postgres negotiates with (it does the `SSLRequest`).
    pub(crate) fn client_mode(&self) -> ClientSslMode {
        match self.mode {
            SslMode::Disable => ClientSslMode::Disable,
            SslMode::Allow | SslMode::Prefer => ClientSslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => ClientSslMode::Require,
        }
    }
}

/// Reads the TLS settings of `database_url` as libpq would, with `env` for the `PG…`
/// variables and `home` for `~/.postgresql/root.crt`; `Err` says why the listener must
/// not connect (the workers then poll).
pub(crate) fn listener_tls(
    database_url: &str,
    env: impl Fn(&str) -> Option<String>,
    home: Option<&Path>,
) -> Result<ListenerTls, String> {
    let is_url = ["postgres://", "postgresql://"]
        .iter()
        .any(|scheme| database_url.starts_with(scheme));
    if !is_url {
        // A keyword/value connection string: tokio-postgres reads it whole, and refuses
        // what it does not know (any verifying mode among them).
        return Ok(ListenerTls {
            url: database_url.to_owned(),
            mode: SslMode::Prefer,
            verification: Verification::None,
        });
    }
    // The query is rebuilt from its own text, the pairs kept as written: decoding and
    // encoding them again could change what tokio-postgres reads (a `+`, say).
    let (base, query) = database_url.split_once('?').unwrap_or((database_url, ""));
    let mut mode = None;
    let mut root_cert = None;
    let mut kept: Vec<&str> = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_decoded(value);
        match percent_decoded(key).as_str() {
            "sslmode" => mode = Some(SslMode::parse(&value)?),
            "sslrootcert" => root_cert = Some(value),
            key @ ("sslcert" | "sslkey" | "sslpassword" | "sslcertmode") => {
                return Err(format!(
                    "the database URL sets {key}: the LISTEN connection presents no client \
                     certificate"
                ))
            }
            // Read by libpq only; the listener's roots and mode are what matter here.
            "sslcrl"
            | "sslcrldir"
            | "sslsni"
            | "ssl_min_protocol_version"
            | "ssl_max_protocol_version"
            | "sslcompression" => {}
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    let mode = match mode {
        Some(mode) => mode,
        None => match env("PGSSLMODE") {
            Some(text) => SslMode::parse(&text)?,
            None => SslMode::Prefer,
        },
    };
    let root_cert = root_cert.or_else(|| env("PGSSLROOTCERT"));
    let roots = match root_cert.as_deref() {
        Some("system") => Some(RootSource::System),
        Some(path) => Some(RootSource::File(PathBuf::from(path))),
        None => home.map(|home| RootSource::File(home.join(".postgresql/root.crt"))),
    };
    let exists = |roots: &RootSource| match roots {
        RootSource::System => true,
        RootSource::File(path) => path.is_file(),
    };
    let verification = match mode {
        SslMode::Disable | SslMode::Allow | SslMode::Prefer => Verification::None,
        SslMode::Require => match roots {
            Some(roots) if exists(&roots) => Verification::Chain { roots, host: false },
            _ => Verification::None,
        },
        SslMode::VerifyCa | SslMode::VerifyFull => match roots {
            Some(roots) if exists(&roots) => Verification::Chain {
                roots,
                host: mode == SslMode::VerifyFull,
            },
            Some(RootSource::File(path)) => {
                return Err(format!(
                    "sslmode {} needs root certificates, and {} does not exist",
                    if mode == SslMode::VerifyFull {
                        "verify-full"
                    } else {
                        "verify-ca"
                    },
                    path.display()
                ))
            }
            _ => return Err("the root certificates cannot be found (set sslrootcert)".into()),
        },
    };
    Ok(ListenerTls {
        url,
        mode,
        verification,
    })
}

/// `%XX` decoded, as libpq reads URL parameters (a bad escape is kept as written).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let escaped = (bytes[at] == b'%')
            .then(|| text.get(at + 1..at + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                at += 3;
            }
            None => {
                out.push(bytes[at]);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The rustls connector for `tls`.
///
/// # Errors
/// When the root certificates cannot be read.
pub(crate) fn connector(tls: &ListenerTls) -> Result<RustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("TLS versions: {error}"))?;
    let verifier: Arc<dyn ServerCertVerifier> = match &tls.verification {
        Verification::None => Arc::new(Unverified(provider)),
        Verification::Chain { roots, host } => {
            let store = Arc::new(root_store(roots)?);
            let webpki =
                rustls::client::WebPkiServerVerifier::builder_with_provider(store, provider)
                    .build()
                    .map_err(|error| format!("the root certificates: {error}"))?;
            if *host {
                webpki
            } else {
                Arc::new(AnyName(webpki))
            }
        }
    };
    let config = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(RustlsConnect(Arc::new(config)))
}

fn root_store(roots: &RootSource) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    match roots {
        RootSource::System => store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        RootSource::File(path) => {
            let certificates = CertificateDer::pem_file_iter(path)
                .and_then(Iterator::collect::<Result<Vec<_>, _>>)
                .map_err(|error| format!("reading {}: {error}", path.display()))?;
            let (added, _) = store.add_parsable_certificates(certificates);
            if added == 0 {
                return Err(format!("{} holds no usable certificate", path.display()));
            }
        }
    }
    Ok(store)
}

/// Checks nothing of the certificate (libpq's `prefer` and `require`): the connection is
/// encrypted to whoever answers, as libpq's is in these modes.
///
/// The handshake's signature is not checked either. It would be checked against the very
/// certificate left unverified, which anyone in the path can make, so it proves nothing
/// here; and webpki refuses to read an X.509 version 1 certificate at all, which is what
/// every Citus node serves (the `citus-auto-ssl` certificate it makes for itself when
/// the extension is created), so checking it would leave the listener deaf there while
/// libpq connects.
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain as webpki checks it, whatever names the certificate holds.
#[derive(Debug)]
struct AnyName(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// tokio-postgres's TLS over tokio-rustls.
#[derive(Clone)]
pub(crate) struct RustlsConnect(Arc<rustls::ClientConfig>);

/// The connector for one host.
pub(crate) struct RustlsHost {
    config: Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
}

impl<S> MakeTlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsHost;
    type Error = rustls::pki_types::InvalidDnsNameError;

    fn make_tls_connect(&mut self, domain: &str) -> Result<RustlsHost, Self::Error> {
        Ok(RustlsHost {
            config: self.0.clone(),
            name: ServerName::try_from(domain.to_owned())?,
        })
    }
}

impl<S> TlsConnect<S> for RustlsHost
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<RustlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        let connector = tokio_rustls::TlsConnector::from(self.config);
        Box::pin(async move {
            let stream = connector.connect(self.name, stream).await?;
            Ok(RustlsStream(Box::new(stream)))
        })
    }
}

/// A TLS stream to the server. No channel binding: SCRAM then authenticates without
/// `-PLUS`, as tokio-postgres's default (`channel_binding=prefer`) allows.
pub(crate) struct RustlsStream<S>(Box<tokio_rustls::client::TlsStream<S>>);

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for RustlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn the_default_is_prefer_without_verification_as_libpq() {
        let tls = listener_tls("postgres://u:p@db.example/mail", no_env, None).expect("ok");
        assert_eq!(tls.mode, SslMode::Prefer);
        assert_eq!(tls.client_mode(), ClientSslMode::Prefer);
        assert_eq!(tls.verification, Verification::None);
        assert_eq!(tls.url, "postgres://u:p@db.example/mail");
    }

    #[test]
    fn the_tls_settings_are_taken_out_of_the_url_and_the_rest_kept() {
        let dir = std::env::temp_dir().join(format!("listen-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let root = dir.join("ca.pem");
        std::fs::write(&root, "not read here").expect("file");
        let url = format!(
            "postgres://u@db.example:6432/mail?sslmode=verify-full&application_name=w&sslrootcert={}",
            root.display()
        );
        let tls = listener_tls(&url, no_env, None).expect("ok");
        assert_eq!(tls.mode, SslMode::VerifyFull);
        assert_eq!(tls.client_mode(), ClientSslMode::Require);
        assert_eq!(
            tls.verification,
            Verification::Chain {
                roots: RootSource::File(root.clone()),
                host: true
            }
        );
        assert_eq!(
            tls.url,
            "postgres://u@db.example:6432/mail?application_name=w"
        );
        assert_eq!(percent_decoded("%2Fetc%2fpg+x%zz"), "/etc/pg+x%zz");
        let parsed: tokio_postgres::Config = tls.url.parse().expect("tokio-postgres reads it");
        assert_eq!(parsed.get_application_name(), Some("w"));

        // verify-ca checks the chain, not the name; require with a root file checks the
        // chain as libpq does.
        let ca = listener_tls(&url.replace("verify-full", "verify-ca"), no_env, None).expect("ok");
        assert_eq!(
            ca.verification,
            Verification::Chain {
                roots: RootSource::File(root.clone()),
                host: false
            }
        );
        let require =
            listener_tls(&url.replace("verify-full", "require"), no_env, None).expect("ok");
        assert_eq!(require.client_mode(), ClientSslMode::Require);
        assert!(matches!(
            require.verification,
            Verification::Chain { host: false, .. }
        ));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn pgsslmode_and_the_home_root_file_apply_when_the_url_says_nothing() {
        let env = |name: &str| (name == "PGSSLMODE").then(|| "require".to_owned());
        let home = std::env::temp_dir().join(format!("listen-tls-home-{}", std::process::id()));
        let tls = listener_tls("postgres://db.example/mail", env, Some(&home)).expect("ok");
        assert_eq!(tls.client_mode(), ClientSslMode::Require);
        assert_eq!(
            tls.verification,
            Verification::None,
            "no root file: unverified"
        );
        let disabled =
            listener_tls("postgres://db.example/mail?sslmode=disable", env, None).expect("ok");
        assert_eq!(
            disabled.client_mode(),
            ClientSslMode::Disable,
            "the URL wins"
        );
    }

    #[test]
    fn what_the_listener_cannot_honour_refuses_it_with_the_reason() {
        let missing = listener_tls(
            "postgres://db.example/mail?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
            no_env,
            None,
        )
        .expect_err("no roots");
        assert!(
            missing.contains("/nonexistent/ca.pem does not exist"),
            "{missing}"
        );
        let client_cert = listener_tls(
            "postgres://db.example/mail?sslmode=require&sslcert=/etc/pg/client.crt",
            no_env,
            None,
        )
        .expect_err("client certificate");
        assert!(client_cert.contains("sslcert"), "{client_cert}");
        let unknown = listener_tls("postgres://db.example/mail?sslmode=sometimes", no_env, None)
            .expect_err("unknown mode");
        assert!(unknown.contains("sometimes"), "{unknown}");
        let system = listener_tls(
            "postgres://db.example/mail?sslmode=verify-full&sslrootcert=system",
            no_env,
            None,
        )
        .expect("system roots");
        assert_eq!(
            system.verification,
            Verification::Chain {
                roots: RootSource::System,
                host: true
            }
        );
        assert!(connector(&system).is_ok(), "the compiled-in roots load");
    }
}
