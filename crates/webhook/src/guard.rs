//! [`EgressUrlGuard`]: the save-time check of a webhook URL.

use std::{
    net::{IpAddr, ToSocketAddrs},
    sync::mpsc,
    thread,
    time::Duration,
};

use mailroom_app::ports::{UrlRefusal, WebhookUrlGuard};
use mailroom_domain::{egress::check_addresses, webhook::WebhookUrl};

/// Checks webhook URLs against the egress policy before they are saved: `https` only, and
/// a host whose every address the egress guard allows.
///
/// With private egress allowed (development and tests) every URL passes without a lookup:
/// the guard would let any address through then, so a lookup could only fail for hosts
/// that do not resolve on a development machine, which is not worth refusing there.
#[derive(Debug, Clone)]
pub struct EgressUrlGuard {
    allow_private_egress: bool,
    resolve_timeout: Duration,
}

impl EgressUrlGuard {
    /// A guard; `allow_private_egress` is `MAILROOM_ALLOW_PRIVATE_EGRESS`.
    pub fn new(allow_private_egress: bool, resolve_timeout: Duration) -> Self {
        Self {
            allow_private_egress,
            resolve_timeout,
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
        let host = url.host();
        let addresses = match host.parse::<IpAddr>() {
            Ok(literal) => vec![literal],
            Err(_) => resolve(host, url.port(), self.resolve_timeout)?,
        };
        check_addresses(host, &addresses, false)
            .map(drop)
            .map_err(|refusal| UrlRefusal::Egress(refusal.to_string()))
    }
}

/// Every address of `name`, asked of the system resolver on a helper thread, so a resolver
/// that hangs costs the request at most `timeout`.
fn resolve(name: &str, port: u16, timeout: Duration) -> Result<Vec<IpAddr>, UrlRefusal> {
    let (sender, receiver) = mpsc::channel();
    let query = name.to_owned();
    // getaddrinfo has no timeout of its own. On a time-out the thread is left to finish by
    // itself; its answer is dropped with the channel.
    thread::Builder::new()
        .name("mailroom-resolve".to_owned())
        .spawn(move || {
            let answer = (query.as_str(), port)
                .to_socket_addrs()
                .map(|found| found.map(|address| address.ip()).collect::<Vec<_>>());
            let _ = sender.send(answer);
        })
        .map_err(|error| UrlRefusal::Resolve(format!("{name}: {error}")))?;
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
        Ok(Err(error)) => Err(UrlRefusal::Resolve(format!("{name}: {error}"))),
        Err(_) => Err(UrlRefusal::Resolve(format!(
            "{name}: no answer within {} s",
            timeout.as_secs_f32()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(allow: bool, url: &str) -> Result<(), UrlRefusal> {
        let url = WebhookUrl::parse(url).expect("valid URL");
        EgressUrlGuard::new(allow, Duration::from_secs(5)).check_url(&url)
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
        // `.invalid` never resolves (RFC 6761).
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
