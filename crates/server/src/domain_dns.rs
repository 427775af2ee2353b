//! The `DomainDns` port over the shared resolver (`mailroom-dns`), so the checks of
//! sending domains ask the nameserver the operator chose (`MAILROOM_DNS_SERVER`), bounded
//! in time and size like every other lookup, on concurrency slots of their own: a
//! tenant's nameserver that never answers cannot hold the slots other tenants' deliveries
//! resolve their mail servers with.

use mailroom_app::ports::DomainDns;
use mailroom_dns::DnsResolver;

/// Sending-domain lookups through the process's one resolver.
#[derive(Debug, Clone)]
pub struct ResolverDomainDns {
    resolver: DnsResolver,
}

impl ResolverDomainDns {
    /// Looks up through `resolver`.
    pub fn new(resolver: DnsResolver) -> Self {
        Self { resolver }
    }
}

impl DomainDns for ResolverDomainDns {
    fn txt(&self, name: &str) -> Result<Vec<String>, String> {
        self.resolver
            .txt_blocking(name)
            .map_err(|error| error.to_string())
    }

    fn mx(&self, name: &str) -> Result<Vec<String>, String> {
        self.resolver
            .mx_blocking(name)
            .map_err(|error| error.to_string())
    }
}
