//! One resolution per connection, through the shared resolver, checked by the egress
//! guard.

use std::net::SocketAddr;

use mailroom_app::ports::ProbeError;
use mailroom_dns::{DnsResolver, LookupError};

/// Resolves `host` once with `resolver`, which checks every address it resolves to with
/// the egress guard, and returns the address to connect to. Connect to this address only:
/// resolving the name a second time would reopen the DNS-rebinding gap the check closes.
///
/// `host` is a name or an IP literal (IPv6 with or without brackets); a literal is taken
/// as it is. The lookup is bounded by the resolver's timeout. With `allow_private` (the
/// operator's `MAILROOM_ALLOW_PRIVATE_EGRESS`) private and loopback addresses pass.
/// Blocking: see [`resolve_pinned_async`] on an executor.
///
/// # Errors
/// [`ProbeError::Resolve`] when the name does not resolve, [`ProbeError::Timeout`] when
/// the resolver does not answer in time, [`ProbeError::EgressRefused`] when any resolved
/// address is in a blocked range (no connection has been attempted then).
pub fn resolve_pinned(
    resolver: &DnsResolver,
    host: &str,
    port: u16,
    allow_private: bool,
) -> Result<SocketAddr, ProbeError> {
    pinned(resolver.resolve_checked_blocking(host, allow_private), port)
}

/// [`resolve_pinned`] for async callers.
///
/// # Errors
/// As [`resolve_pinned`].
pub async fn resolve_pinned_async(
    resolver: &DnsResolver,
    host: &str,
    port: u16,
    allow_private: bool,
) -> Result<SocketAddr, ProbeError> {
    pinned(resolver.resolve_checked(host, allow_private).await, port)
}

fn pinned(
    found: Result<Vec<std::net::IpAddr>, LookupError>,
    port: u16,
) -> Result<SocketAddr, ProbeError> {
    match found {
        // `resolve_checked` refuses an empty answer, so there is a first address.
        Ok(addresses) => addresses
            .first()
            .map(|&address| SocketAddr::new(address, port))
            .ok_or_else(|| ProbeError::Resolve("no address".to_owned())),
        Err(LookupError::NotFound(text)) => Err(ProbeError::Resolve(text)),
        Err(LookupError::Timeout(text)) => Err(ProbeError::Timeout(text)),
        Err(LookupError::Refused(refusal)) => Err(ProbeError::EgressRefused(refusal.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolver() -> DnsResolver {
        DnsResolver::process_default()
    }

    #[test]
    fn literals_are_taken_as_they_are() {
        let pinned = resolve_pinned(&resolver(), "[::1]", 2525, true).unwrap();
        assert_eq!(pinned, "[::1]:2525".parse().unwrap());
        let pinned = resolve_pinned(&resolver(), " 93.184.216.34 ", 25, false).unwrap();
        assert_eq!(pinned, "93.184.216.34:25".parse().unwrap());
    }

    #[test]
    fn localhost_is_resolved_and_refused_as_loopback() {
        let refused = resolve_pinned(&resolver(), "localhost", 25, false).unwrap_err();
        let ProbeError::EgressRefused(text) = refused else {
            panic!("expected an egress refusal, got {refused:?}");
        };
        assert!(
            text.contains("(resolved from localhost) is loopback"),
            "{text}"
        );
    }

    #[test]
    fn an_empty_or_unknown_host_does_not_resolve() {
        assert!(matches!(
            resolve_pinned(&resolver(), "  ", 25, true),
            Err(ProbeError::Resolve(_))
        ));
        // `.invalid` never resolves (RFC 6761); without a reachable nameserver, the
        // lookup times out instead.
        assert!(matches!(
            resolve_pinned(&resolver(), "mail.example.invalid", 25, true),
            Err(ProbeError::Resolve(_) | ProbeError::Timeout(_))
        ));
    }
}
