//! [`EgressUrlGuard`]: the save-time check of a webhook URL.

use mailroom_app::ports::{UrlRefusal, WebhookUrlGuard};
use mailroom_dns::{DnsResolver, LookupError};
use mailroom_domain::webhook::WebhookUrl;

/// Checks webhook URLs against the egress policy before they are saved: `https` only, and
/// a host whose every address the egress guard allows.
///
/// With private egress allowed (development and tests) every URL passes without a lookup:
/// the guard would let any address through then, so a lookup could only fail for hosts
/// that do not resolve on a development machine, which is not worth refusing there.
#[derive(Debug, Clone)]
pub struct EgressUrlGuard {
    allow_private_egress: bool,
    resolver: DnsResolver,
}

impl EgressUrlGuard {
    /// A guard resolving with `resolver` (the server's shared one, whose timeout bounds
    /// each lookup); `allow_private_egress` is `MAILROOM_ALLOW_PRIVATE_EGRESS`.
    pub fn new(allow_private_egress: bool, resolver: DnsResolver) -> Self {
        Self {
            allow_private_egress,
            resolver,
        }
    }
}

impl WebhookUrlGuard for EgressUrlGuard {
    fn check_url(&self, url: &WebhookUrl) -> Result<(), UrlRefusal> {
        if self.allow_private_egress {
            return Ok(());
        }
        if !url.is_https() {
            return Err(UrlRefusal::NotHttps);
        }
        // The save-time check runs on a blocking thread (the port is synchronous).
        match self.resolver.resolve_checked_blocking(url.host(), false) {
            Ok(_) => Ok(()),
            Err(LookupError::Refused(refusal)) => Err(UrlRefusal::Egress(refusal.to_string())),
            Err(LookupError::NotFound(text) | LookupError::Timeout(text)) => {
                Err(UrlRefusal::Resolve(text))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(allow: bool, url: &str) -> Result<(), UrlRefusal> {
        let url = WebhookUrl::parse(url).expect("valid URL");
        EgressUrlGuard::new(allow, DnsResolver::process_default()).check_url(&url)
    }

    #[test]
    fn production_mode_requires_https_and_public_addresses() {
        assert_eq!(
            check(false, "http://93.184.216.34/x"),
            Err(UrlRefusal::NotHttps)
        );
        assert_eq!(check(false, "https://93.184.216.34/x"), Ok(()));
        assert_eq!(
            check(false, "https://127.0.0.1:8443/x"),
            Err(UrlRefusal::Egress(
                "127.0.0.1 is loopback (127.0.0.0/8)".into()
            ))
        );
        assert!(matches!(
            check(false, "https://[::ffff:169.254.169.254]/latest"),
            Err(UrlRefusal::Egress(_))
        ));
        assert!(matches!(
            check(false, "https://10.1.2.3/"),
            Err(UrlRefusal::Egress(_))
        ));
        // `.invalid` never resolves (RFC 6761); without a reachable nameserver the lookup
        // times out, which is refused the same way.
        assert!(matches!(
            check(false, "https://hooks.example.invalid/x"),
            Err(UrlRefusal::Resolve(_))
        ));
    }

    #[test]
    fn private_egress_lets_everything_through_without_a_lookup() {
        assert_eq!(check(true, "http://127.0.0.1:9/x"), Ok(()));
        assert_eq!(check(true, "https://hooks.example.invalid/x"), Ok(()));
    }
}
