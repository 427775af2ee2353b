//! Sending domains through the client against the real server, whose resolver is the
//! loopback DNS server of crates/test-support (`MAILROOM_DNS_SERVER` in production): a
//! domain is created, read every way, verified once its DKIM record is served, rotated to
//! a new key, rid of the old one and deleted; a bad name is a typed problem.

use mailroom_client::{Error, NewDomain, PageRequest, SendingDomain, TryStreamExt};
use mailroom_test_support::TestDnsServer;

use crate::support::Setup;

/// The record of `purpose` the domain asks its owner to publish.
fn record<'a>(domain: &'a SendingDomain, purpose: &str) -> &'a mailroom_client::DnsRecord {
    domain
        .records
        .iter()
        .find(|record| record.purpose == purpose)
        .unwrap_or_else(|| panic!("no {purpose} record in {domain:?}"))
}

#[tokio::test]
async fn a_domain_is_created_verified_rotated_and_deleted() {
    let dns = TestDnsServer::start();
    let resolver = dns.address();
    let setup = Setup::new(|config| config.dns_server = Some(resolver)).await;
    let client = &setup.client;
    let account = setup.account().await;

    let domain = client
        .create_domain(account, &NewDomain::new("Mail.Acme.Example"))
        .await
        .expect("domain created");
    assert_eq!(domain.name, "mail.acme.example");
    assert_eq!(domain.status, "pending");
    assert_eq!(domain.verified_at, None);
    assert_eq!(domain.checked_at, None);
    assert_eq!(domain.dkim.signing_selector, None);
    assert_eq!(domain.dkim.selectors.len(), 1);
    let old = domain.dkim.selectors[0].clone();
    assert_eq!(old.status, "pending");
    let dkim = record(&domain, "dkim");
    assert_eq!(dkim.record_type, "TXT");
    assert_eq!(
        dkim.name,
        format!("{}._domainkey.mail.acme.example", old.selector)
    );
    assert_eq!(dkim.value, format!("v=DKIM1; k=rsa; p={}", old.public_key));
    assert_eq!(record(&domain, "spf").name, "mail.acme.example");

    // Every way of reading it agrees.
    let page = client
        .list_domains(account, PageRequest::default())
        .await
        .expect("page");
    assert_eq!(page.items, std::slice::from_ref(&domain));
    let streamed: Vec<_> = client
        .stream_domains(account)
        .try_collect()
        .await
        .expect("stream");
    assert_eq!(streamed, std::slice::from_ref(&domain));
    assert_eq!(client.count_domains(account).await.expect("count"), 1);
    assert_eq!(
        client.get_domain(account, domain.id).await.expect("read"),
        domain
    );

    // Nothing published: the check fails.
    let failed = client
        .verify_domain(account, domain.id)
        .await
        .expect("checked");
    assert_eq!(failed.status, "failed");
    assert!(failed.checked_at.is_some());

    // The DKIM record served: verified, and the key signs.
    dns.add_txt(&dkim.name, &dkim.value);
    let verified = client
        .verify_domain(account, domain.id)
        .await
        .expect("checked");
    assert_eq!(verified.status, "verified", "{verified:?}");
    assert!(verified.verified_at.is_some());
    assert_eq!(record(&verified, "dkim").status, "verified");
    assert_eq!(
        verified.dkim.signing_selector.as_deref(),
        Some(old.selector.as_str())
    );

    // Rotation adds a pending key; the old one signs until the new one's record is found.
    let rotated = client
        .rotate_domain_key(account, domain.id)
        .await
        .expect("rotated");
    assert_eq!(rotated.dkim.selectors.len(), 2);
    let new = rotated.dkim.selectors[1].clone();
    assert_ne!(new.selector, old.selector);
    assert_eq!(new.status, "pending");
    assert_eq!(
        rotated.dkim.signing_selector.as_deref(),
        Some(old.selector.as_str())
    );
    let new_record = rotated
        .records
        .iter()
        .find(|record| record.name.starts_with(&format!("{}.", new.selector)))
        .expect("the new key's record");
    dns.add_txt(&new_record.name, &new_record.value);
    let both = client
        .verify_domain(account, domain.id)
        .await
        .expect("checked");
    assert_eq!(
        both.dkim.signing_selector.as_deref(),
        Some(new.selector.as_str())
    );

    // The old key goes; the last one cannot.
    let left = client
        .remove_selector(account, domain.id, &old.selector)
        .await
        .expect("old key removed");
    let selectors: Vec<_> = left.dkim.selectors.iter().map(|k| &k.selector).collect();
    assert_eq!(selectors, [&new.selector]);
    assert_eq!(left.status, "verified");
    let error = client
        .remove_selector(account, domain.id, &new.selector)
        .await
        .expect_err("the only key stays");
    assert_eq!(error.status(), Some(400), "{error:?}");
    let error = client
        .remove_selector(account, domain.id, &old.selector)
        .await
        .expect_err("already gone");
    assert_eq!(error.status(), Some(404), "{error:?}");

    let deleted = client
        .delete_domain(account, domain.id)
        .await
        .expect("deleted");
    assert_eq!(deleted.id, domain.id);
    let error = client
        .get_domain(account, domain.id)
        .await
        .expect_err("gone");
    assert_eq!(error.status(), Some(404), "{error:?}");
    assert_eq!(client.count_domains(account).await.expect("count"), 0);
}

#[tokio::test]
async fn a_bad_domain_name_is_a_typed_problem_naming_the_field() {
    let setup = Setup::new(|_| {}).await;
    let account = setup.account().await;
    for name in ["localhost", "exa mple.com", "10.0.0.1"] {
        let error = setup
            .client
            .create_domain(account, &NewDomain::new(name))
            .await
            .expect_err("refused");
        let Error::Api(problem) = &error else {
            panic!("{name}: not a problem: {error:?}");
        };
        assert_eq!(problem.status, 400, "{name}: {problem:?}");
        assert!(problem.field("name").is_some(), "{name}: {problem:?}");
    }
    assert_eq!(setup.client.count_domains(account).await.expect("count"), 0);
}
