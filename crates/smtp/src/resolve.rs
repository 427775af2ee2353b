//! One resolution per connection, checked by the egress guard.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use mailroom_app::ports::ProbeError;
use mailroom_domain::egress::check_addresses;

/// Resolves `host` once, checks every address it resolves to with the egress guard, and
/// returns the address to connect to. Connect to this address only: resolving the name a
/// second time would reopen the DNS-rebinding gap the check closes.
///
/// `host` is a name or an IP literal (IPv6 with or without brackets); a literal is taken
/// as it is. A name is resolved by the system resolver on a helper thread, so a resolver
/// that hangs costs at most `timeout`. With `allow_private` (the operator's
/// `MAILROOM_ALLOW_PRIVATE_EGRESS`) private and loopback addresses pass.
///
/// # Errors
/// [`ProbeError::Resolve`] when the name does not resolve, [`ProbeError::Timeout`] when
/// the resolver does not answer in time, [`ProbeError::EgressRefused`] when any resolved
/// address is in a blocked range (no connection has been attempted then).
pub fn resolve_pinned(
    host: &str,
    port: u16,
    allow_private: bool,
    timeout: Duration,
) -> Result<SocketAddr, ProbeError> {
    let host = host.trim();
    let bare = host
        .strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .unwrap_or(host);
    if bare.is_empty() {
        return Err(ProbeError::Resolve("the host is empty".to_owned()));
    }
    let addresses = match bare.parse::<IpAddr>() {
        Ok(literal) => vec![literal],
        // Also the path for forms like `127.1` or `2130706433`, which the system resolver
        // turns into addresses; those are checked like any other answer.
        Err(_) => resolve_name(bare, port, timeout)?,
    };
    let address = check_addresses(bare, &addresses, allow_private)
        .map_err(|refusal| ProbeError::EgressRefused(refusal.to_string()))?;
    Ok(SocketAddr::new(address, port))
}

/// All addresses of `name`, in the resolver's order, without duplicates.
fn resolve_name(name: &str, port: u16, timeout: Duration) -> Result<Vec<IpAddr>, ProbeError> {
    let (sender, receiver) = mpsc::channel();
    let query = name.to_owned();
    // getaddrinfo has no timeout of its own. On a time-out the thread is left to finish
    // (or fail) by itself; its answer is dropped with the channel.
    thread::Builder::new()
        .name("mailroom-resolve".to_owned())
        .spawn(move || {
            let answer = (query.as_str(), port)
                .to_socket_addrs()
                .map(|found| found.map(|address| address.ip()).collect::<Vec<_>>());
            let _ = sender.send(answer);
        })
        .map_err(|error| ProbeError::Resolve(format!("{name}: {error}")))?;
    match receiver.recv_timeout(timeout) {
        Ok(Ok(found)) => {
            let mut unique = Vec::with_capacity(found.len());
            for address in found {
                if !unique.contains(&address) {
                    unique.push(address);
                }
            }
            Ok(unique)
        }
        Ok(Err(error)) => Err(ProbeError::Resolve(format!("{name}: {error}"))),
        Err(_) => Err(ProbeError::Timeout(format!(
            "resolving {name} took longer than {} s",
            timeout.as_secs_f32()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(10);

    #[test]
    fn literals_are_taken_as_they_are() {
        let pinned = resolve_pinned("[::1]", 2525, true, TIMEOUT).unwrap();
        assert_eq!(pinned, "[::1]:2525".parse().unwrap());
        let pinned = resolve_pinned(" 93.184.216.34 ", 25, false, TIMEOUT).unwrap();
        assert_eq!(pinned, "93.184.216.34:25".parse().unwrap());
    }

    #[test]
    fn numeric_shorthand_is_resolved_and_checked() {
        let refused = resolve_pinned("127.1", 25, false, TIMEOUT).unwrap_err();
        assert_eq!(
            refused,
            ProbeError::EgressRefused(
                "127.0.0.1 (resolved from 127.1) is loopback (127.0.0.0/8)".to_owned()
            )
        );
    }

    #[test]
    fn an_empty_or_unknown_host_does_not_resolve() {
        assert!(matches!(
            resolve_pinned("  ", 25, true, TIMEOUT),
            Err(ProbeError::Resolve(_))
        ));
        // `.invalid` never resolves (RFC 6761), and the sandbox resolver answers at once.
        assert!(matches!(
            resolve_pinned("mail.example.invalid", 25, true, TIMEOUT),
            Err(ProbeError::Resolve(_) | ProbeError::Timeout(_))
        ));
    }
}
