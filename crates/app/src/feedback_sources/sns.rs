//! What SNS messages need from outside: the signing certificate and the subscription
//! confirmation, fetched only from SNS hosts, and a bounded cache of certificate keys.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex, PoisonError},
};

use mailroom_domain::feedback_source::is_sns_host;
use rsa::RsaPublicKey;
use url::Url;

use crate::ports::SnsClient;

/// The most signing certificates kept (SNS uses one per region at a time, and rotates
/// them rarely).
pub const MAX_CACHED_CERTIFICATES: usize = 32;

/// The largest certificate or confirmation answer read.
pub(crate) const MAX_SNS_ANSWER_BYTES: usize = 16 * 1024;

/// How SNS is reached.
#[derive(Clone)]
pub struct SnsSettings {
    /// The HTTP client (egress guarded, bounded).
    pub client: Arc<dyn SnsClient>,
    /// `MAILROOM_SNS_TEST_ORIGIN`: for tests only, an origin (`http://127.0.0.1:PORT`)
    /// accepted *instead of* `https://sns.<region>.amazonaws.com`. `None` (the default)
    /// accepts SNS hosts over HTTPS only.
    pub test_origin: Option<String>,
    /// Keys of certificates already fetched, shared by the process.
    pub certificates: Arc<CertificateCache>,
}

/// Certificate keys by URL, at most [`MAX_CACHED_CERTIFICATES`], the oldest dropped
/// first.
#[derive(Debug, Default)]
pub struct CertificateCache {
    inner: Mutex<(HashMap<String, RsaPublicKey>, VecDeque<String>)>,
}

impl CertificateCache {
    /// The key of the certificate at `url`, if cached.
    pub fn get(&self, url: &str) -> Option<RsaPublicKey> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.0.get(url).cloned()
    }

    /// Keeps `key` for `url`.
    pub fn insert(&self, url: &str, key: RsaPublicKey) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let (keys, order) = &mut *inner;
        if keys.insert(url.to_owned(), key).is_none() {
            order.push_back(url.to_owned());
        }
        while order.len() > MAX_CACHED_CERTIFICATES {
            if let Some(oldest) = order.pop_front() {
                keys.remove(&oldest);
            }
        }
    }

    /// How many keys are kept.
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a URL from an SNS message is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SnsUrl {
    /// `SigningCertURL`: must also name a certificate as SNS names them.
    Certificate,
    /// `SubscribeURL`.
    Subscribe,
}

/// Whether `text` may be fetched: `https://sns.<region>.amazonaws.com/…` with no
/// credentials and the default port, or, when a test origin is set, that origin alone.
/// Checked before anything is fetched.
pub(crate) fn allowed_url(text: &str, use_: SnsUrl, test_origin: Option<&str>) -> Option<Url> {
    let url = Url::parse(text).ok()?;
    if !url.username().is_empty() || url.password().is_some() {
        return None;
    }
    if use_ == SnsUrl::Certificate && !is_certificate_path(&url) {
        return None;
    }
    let allowed = match test_origin {
        Some(origin) => url.origin().ascii_serialization() == origin.trim_end_matches('/'),
        None => {
            url.scheme() == "https"
                && url.port().is_none()
                && matches!(url.host(), Some(url::Host::Domain(host)) if is_sns_host(host))
        }
    };
    allowed.then_some(url)
}

/// Whether `url` names a certificate as SNS publishes them:
/// `/SimpleNotificationService-<hex>.pem`, no query. Anything else on an SNS host is not
/// fetched, so a source's URL cannot be used to make Mailroom fetch arbitrary AWS pages.
fn is_certificate_path(url: &Url) -> bool {
    url.query().is_none()
        && url
            .path()
            .strip_prefix("/SimpleNotificationService-")
            .and_then(|rest| rest.strip_suffix(".pem"))
            .is_some_and(|hex| {
                !hex.is_empty() && hex.len() <= 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())
            })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sns_hosts_over_https_are_fetched_unless_a_test_origin_replaces_them() {
        let cert = |url| allowed_url(url, SnsUrl::Certificate, None).is_some();
        assert!(cert(
            "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-abc.pem"
        ));
        assert!(!cert(
            "http://sns.us-east-1.amazonaws.com/SimpleNotificationService-abc.pem"
        ));
        assert!(!cert("https://sns.us-east-1.amazonaws.com:8443/x.pem"));
        assert!(!cert(
            "https://sns.us-east-1.amazonaws.com.evil.example/x.pem"
        ));
        assert!(!cert(
            "https://evil.example/sns.us-east-1.amazonaws.com/x.pem"
        ));
        assert!(!cert("https://u:p@sns.us-east-1.amazonaws.com/x.pem"));
        assert!(!cert("https://sns.us-east-1.amazonaws.com/x.txt"));
        assert!(!cert("https://sns.us-east-1.amazonaws.com/x.pem"));
        assert!(!cert(
            "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-abc.pem?x=1"
        ));
        assert!(!cert(
            "https://sns.us-east-1.amazonaws.com/a/SimpleNotificationService-abc.pem"
        ));
        assert!(!cert("https://127.0.0.1/x.pem"));
        assert!(allowed_url(
            "https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription&Token=x",
            SnsUrl::Subscribe,
            None
        )
        .is_some());
        let test = Some("http://127.0.0.1:4000");
        let pem = "/SimpleNotificationService-0a1b.pem";
        assert!(allowed_url(
            &format!("http://127.0.0.1:4000{pem}"),
            SnsUrl::Certificate,
            test
        )
        .is_some());
        assert!(allowed_url(
            &format!("http://127.0.0.1:4001{pem}"),
            SnsUrl::Certificate,
            test
        )
        .is_none());
        assert!(allowed_url(
            "https://sns.us-east-1.amazonaws.com/c.pem",
            SnsUrl::Certificate,
            test
        )
        .is_none());
    }

    #[test]
    fn the_cache_keeps_the_newest_certificates_only() {
        use rsa::BigUint;
        let key = RsaPublicKey::new(
            BigUint::from_bytes_be(&[0xff; 256]),
            BigUint::from(65_537u32),
        )
        .expect("a 2048-bit modulus");
        let cache = CertificateCache::default();
        for n in 0..40 {
            cache.insert(&format!("u{n}"), key.clone());
        }
        assert_eq!(cache.len(), MAX_CACHED_CERTIFICATES);
        assert!(cache.get("u0").is_none());
        assert!(cache.get("u39").is_some());
    }
}
