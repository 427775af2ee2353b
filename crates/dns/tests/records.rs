//! TXT and MX lookups (the checks of sending domains) against a real DNS server on
//! loopback: answers are read whole within their bounds, what is beyond is dropped, and
//! a server that never answers costs one lookup timeout.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use mailroom_dns::{DnsResolver, DnsSettings, LookupError, MAX_RECORDS, MAX_TXT_BYTES};
use mailroom_test_support::TestDnsServer;

fn resolver(server: std::net::SocketAddr, timeout: Duration) -> DnsResolver {
    DnsResolver::new(DnsSettings {
        nameserver: Some(server),
        lookup_timeout: timeout,
        ..DnsSettings::default()
    })
    .expect("resolver")
}

#[test]
fn txt_and_mx_records_are_read_within_their_bounds() {
    let dns = TestDnsServer::start();
    let resolver = resolver(dns.address(), Duration::from_secs(5));
    // A 2048-bit DKIM key's record: longer than one 255-byte string, joined back.
    let key = format!("v=DKIM1; k=rsa; p={}", "A".repeat(392));
    dns.add_txt("sel._domainkey.acme.example", &key);
    assert_eq!(
        resolver.txt_blocking("sel._domainkey.acme.example"),
        Ok(vec![key])
    );
    // No such name, and a name without TXT: empty, not an error.
    assert_eq!(resolver.txt_blocking("nothing.acme.example"), Ok(vec![]));
    dns.add_mx("bounces.acme.example", 10, "In.Mailroom.Test");
    assert_eq!(resolver.txt_blocking("bounces.acme.example"), Ok(vec![]));
    assert_eq!(
        resolver.mx_blocking("bounces.acme.example"),
        Ok(vec!["in.mailroom.test".to_owned()])
    );

    // Past the bounds: a record over MAX_TXT_BYTES is dropped, records past MAX_RECORDS
    // are not kept.
    dns.add_txt("big.acme.example", &"x".repeat(MAX_TXT_BYTES + 1));
    dns.add_txt("big.acme.example", "v=spf1 -all");
    assert_eq!(
        resolver.txt_blocking("big.acme.example"),
        Ok(vec!["v=spf1 -all".to_owned()])
    );
    for n in 0..MAX_RECORDS + 8 {
        dns.add_txt("many.acme.example", &format!("record {n}"));
    }
    let many = resolver.txt_blocking("many.acme.example").expect("records");
    assert_eq!(many.len(), MAX_RECORDS);
}

#[test]
fn a_server_that_never_answers_costs_one_lookup_timeout() {
    // Bound and silent: queries arrive and are never answered.
    let silent = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let resolver = resolver(
        silent.local_addr().expect("address"),
        Duration::from_secs(1),
    );
    let started = Instant::now();
    let outcome = resolver.txt_blocking("acme.example");
    let took = started.elapsed();
    assert!(
        matches!(outcome, Err(LookupError::Timeout(_))),
        "{outcome:?}"
    );
    assert!(took < Duration::from_millis(2500), "took {took:?}");
}
