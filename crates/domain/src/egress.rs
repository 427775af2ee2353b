//! The egress guard: which network addresses Mailroom may connect to on a customer's behalf.
//!
//! Mail-server hosts and webhook URLs come from API callers. Without a guard, a caller
//! could make the service connect to its own loopback services, to the private network it
//! runs in, or to a cloud metadata endpoint (169.254.169.254) and read the answer back
//! through an error message: server-side request forgery. The adapters resolve a host,
//! pass **every** resolved address to [`check_addresses`], and connect only to the address
//! it returns, never to a second resolution (a name that resolves to a public address
//! for the check and a private one for the connection is the DNS-rebinding attack).
//!
//! The rules are pure: this module does no resolution and no I/O.
//!
//! ```
//! use std::net::IpAddr;
//! use mailroom_domain::egress::{blocked_range, check_addresses, BlockedRange};
//!
//! let metadata: IpAddr = "169.254.169.254".parse().unwrap();
//! assert_eq!(blocked_range(metadata), Some(BlockedRange::LinkLocal));
//!
//! let public: IpAddr = "93.184.216.34".parse().unwrap();
//! assert_eq!(check_addresses("example.com", &[public], false), Ok(public));
//! ```

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A special-purpose address range that outbound connections must not reach (unless the
/// operator allows private egress). `Display` names the range for a person, with its
/// prefix, e.g. `loopback (127.0.0.0/8)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlockedRange {
    /// `0.0.0.0/8`, "this network" (RFC 791); `0.0.0.0` reaches the local host on Linux.
    ThisNetwork,
    /// `127.0.0.0/8`, IPv4 loopback.
    Loopback,
    /// `10.0.0.0/8`, private network (RFC 1918).
    Private10,
    /// `172.16.0.0/12`, private network (RFC 1918).
    Private172,
    /// `192.168.0.0/16`, private network (RFC 1918).
    Private192,
    /// `100.64.0.0/10`, carrier-grade NAT shared address space (RFC 6598).
    SharedAddressSpace,
    /// `169.254.0.0/16`, IPv4 link-local, which holds the cloud metadata service
    /// `169.254.169.254`.
    LinkLocal,
    /// `192.0.0.0/24`, IETF protocol assignments (RFC 6890).
    IetfProtocolAssignments,
    /// `192.0.2.0/24`, documentation (TEST-NET-1, RFC 5737).
    Documentation1,
    /// `198.51.100.0/24`, documentation (TEST-NET-2, RFC 5737).
    Documentation2,
    /// `203.0.113.0/24`, documentation (TEST-NET-3, RFC 5737).
    Documentation3,
    /// `198.18.0.0/15`, network benchmarking (RFC 2544).
    Benchmarking,
    /// `224.0.0.0/4`, IPv4 multicast.
    Multicast,
    /// `240.0.0.0/4`, reserved for future use (RFC 1112).
    Reserved,
    /// `255.255.255.255`, limited broadcast.
    Broadcast,
    /// `::`, the IPv6 unspecified address.
    Ipv6Unspecified,
    /// `::1`, IPv6 loopback.
    Ipv6Loopback,
    /// `::/96` other than `::` and `::1`: the deprecated IPv4-compatible addresses
    /// (RFC 4291), which nothing routes on purpose.
    Ipv4Compatible,
    /// `100::/64`, the IPv6 discard-only prefix (RFC 6666).
    Ipv6Discard,
    /// `2001:db8::/32`, IPv6 documentation (RFC 3849).
    Ipv6Documentation,
    /// `fc00::/7`, IPv6 unique local addresses (RFC 4193), the IPv6 private networks.
    Ipv6UniqueLocal,
    /// `fe80::/10`, IPv6 link-local.
    Ipv6LinkLocal,
    /// `fec0::/10`, deprecated IPv6 site-local (RFC 3879).
    Ipv6SiteLocal,
    /// `ff00::/8`, IPv6 multicast.
    Ipv6Multicast,
    /// `64:ff9b:1::/48`, the local-use NAT64 prefix (RFC 8215): translators inside the
    /// operator's network, with an IPv4 embedding of their own choosing.
    Nat64LocalUse,
}

impl BlockedRange {
    /// A short name for the range, e.g. `loopback`.
    pub fn name(self) -> &'static str {
        match self {
            Self::ThisNetwork => "\"this network\"",
            Self::Loopback | Self::Ipv6Loopback => "loopback",
            Self::Private10 | Self::Private172 | Self::Private192 => "a private network",
            Self::SharedAddressSpace => "carrier-grade NAT shared address space",
            Self::LinkLocal | Self::Ipv6LinkLocal => "link-local",
            Self::IetfProtocolAssignments => "IETF protocol assignments",
            Self::Documentation1
            | Self::Documentation2
            | Self::Documentation3
            | Self::Ipv6Documentation => "documentation",
            Self::Benchmarking => "benchmarking",
            Self::Multicast | Self::Ipv6Multicast => "multicast",
            Self::Reserved => "reserved",
            Self::Broadcast => "broadcast",
            Self::Ipv6Unspecified => "unspecified",
            Self::Ipv4Compatible => "deprecated IPv4-compatible",
            Self::Ipv6Discard => "discard-only",
            Self::Ipv6UniqueLocal => "unique local (IPv6 private network)",
            Self::Ipv6SiteLocal => "deprecated site-local",
            Self::Nat64LocalUse => "local-use NAT64",
        }
    }

    /// The range in prefix notation, e.g. `127.0.0.0/8`, or the address itself for a
    /// range of one (`::1`, `255.255.255.255`).
    pub fn prefix(self) -> &'static str {
        match self {
            Self::ThisNetwork => "0.0.0.0/8",
            Self::Loopback => "127.0.0.0/8",
            Self::Private10 => "10.0.0.0/8",
            Self::Private172 => "172.16.0.0/12",
            Self::Private192 => "192.168.0.0/16",
            Self::SharedAddressSpace => "100.64.0.0/10",
            Self::LinkLocal => "169.254.0.0/16",
            Self::IetfProtocolAssignments => "192.0.0.0/24",
            Self::Documentation1 => "192.0.2.0/24",
            Self::Documentation2 => "198.51.100.0/24",
            Self::Documentation3 => "203.0.113.0/24",
            Self::Benchmarking => "198.18.0.0/15",
            Self::Multicast => "224.0.0.0/4",
            Self::Reserved => "240.0.0.0/4",
            Self::Broadcast => "255.255.255.255",
            Self::Ipv6Unspecified => "::",
            Self::Ipv6Loopback => "::1",
            Self::Ipv4Compatible => "::/96",
            Self::Ipv6Discard => "100::/64",
            Self::Ipv6Documentation => "2001:db8::/32",
            Self::Ipv6UniqueLocal => "fc00::/7",
            Self::Ipv6LinkLocal => "fe80::/10",
            Self::Ipv6SiteLocal => "fec0::/10",
            Self::Ipv6Multicast => "ff00::/8",
            Self::Nat64LocalUse => "64:ff9b:1::/48",
        }
    }
}

impl fmt::Display for BlockedRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The one address people know in the IPv4 link-local range, and why it matters.
        let note = match self {
            Self::LinkLocal => ", incl. the cloud metadata service 169.254.169.254",
            _ => "",
        };
        write!(f, "{} ({}{note})", self.name(), self.prefix())
    }
}

/// The blocked range `ip` falls in, or `None` for an address that may be reached.
///
/// IPv6 forms that carry an IPv4 address are judged by that address (see
/// [`embedded_ipv4`]): IPv4-mapped `::ffff:a.b.c.d` (the kernel connects to `a.b.c.d` over
/// IPv4), SIIT IPv4-translated `::ffff:0:a.b.c.d`, well-known NAT64 `64:ff9b::/96`, 6to4
/// `2002::/16` and Teredo `2001::/32` (a relay or translator carries the traffic to the
/// IPv4 address, which may be inside the network). So `::ffff:127.0.0.1` is
/// [`BlockedRange::Loopback`], and `::ffff:8.8.8.8` is allowed. The local-use NAT64
/// prefix `64:ff9b:1::/48` is refused whole ([`BlockedRange::Nat64LocalUse`]): its
/// translators are the operator's own and its IPv4 embedding is theirs to choose.
pub fn blocked_range(ip: IpAddr) -> Option<BlockedRange> {
    match ip {
        IpAddr::V4(v4) => blocked_v4(v4),
        IpAddr::V6(v6) => blocked_v6(v6),
    }
}

/// The IPv4 addresses an IPv6 address stands for, in the order they are judged; empty for
/// an address that carries none.
///
/// - IPv4-mapped `::ffff:0:0/96` and SIIT IPv4-translated `::ffff:0:0:0/96` (RFC 7915):
///   the last 32 bits.
/// - Well-known NAT64 `64:ff9b::/96` (RFC 6052): the last 32 bits.
/// - 6to4 `2002::/16` (RFC 3056): bits 16–47, the site's IPv4 address.
/// - Teredo `2001::/32` (RFC 4380): the client's IPv4 address, which is the last 32 bits
///   inverted, then the Teredo server's IPv4 address in bits 32–63.
///
/// ```
/// use std::net::Ipv4Addr;
/// use mailroom_domain::egress::embedded_ipv4;
///
/// assert_eq!(embedded_ipv4("2002:a00:1::".parse().unwrap()), [Ipv4Addr::new(10, 0, 0, 1)]);
/// assert!(embedded_ipv4("2606:4700::1111".parse().unwrap()).is_empty());
/// ```
pub fn embedded_ipv4(ip: Ipv6Addr) -> Vec<Ipv4Addr> {
    let s = ip.segments();
    let bits = u128::from(ip);
    let v4_at = |shift: u32| Ipv4Addr::from((bits >> shift) as u32);
    let mapped = s[..6] == [0, 0, 0, 0, 0, 0xffff];
    let translated = s[..6] == [0, 0, 0, 0, 0xffff, 0];
    let nat64 = s[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
    if mapped || translated || nat64 {
        vec![v4_at(0)]
    } else if s[0] == 0x2002 {
        vec![v4_at(80)]
    } else if s[..2] == [0x2001, 0] {
        vec![Ipv4Addr::from(!(bits as u32)), v4_at(64)]
    } else {
        Vec::new()
    }
}

/// The first IPv4 address carried by `ip` that is blocked, with its range.
fn blocked_embedded(ip: Ipv6Addr) -> Option<(Ipv4Addr, BlockedRange)> {
    embedded_ipv4(ip)
        .into_iter()
        .find_map(|v4| blocked_v4(v4).map(|range| (v4, range)))
}

fn blocked_v4(ip: Ipv4Addr) -> Option<BlockedRange> {
    let bits = u32::from(ip);
    // (network, prefix length, range); broadcast comes before the reserved 240/4 it sits in.
    const RANGES: [(u32, u32, BlockedRange); 15] = [
        (0xffff_ffff, 32, BlockedRange::Broadcast),
        (0x0000_0000, 8, BlockedRange::ThisNetwork),
        (0x7f00_0000, 8, BlockedRange::Loopback),
        (0x0a00_0000, 8, BlockedRange::Private10),
        (0xac10_0000, 12, BlockedRange::Private172),
        (0xc0a8_0000, 16, BlockedRange::Private192),
        (0x6440_0000, 10, BlockedRange::SharedAddressSpace),
        (0xa9fe_0000, 16, BlockedRange::LinkLocal),
        (0xc000_0000, 24, BlockedRange::IetfProtocolAssignments),
        (0xc000_0200, 24, BlockedRange::Documentation1),
        (0xc633_6400, 24, BlockedRange::Documentation2),
        (0xcb00_7100, 24, BlockedRange::Documentation3),
        (0xc612_0000, 15, BlockedRange::Benchmarking),
        (0xe000_0000, 4, BlockedRange::Multicast),
        (0xf000_0000, 4, BlockedRange::Reserved),
    ];
    RANGES
        .iter()
        .find(|(network, len, _)| bits >> (32 - len) == network >> (32 - len))
        .map(|&(_, _, range)| range)
}

fn blocked_v6(ip: Ipv6Addr) -> Option<BlockedRange> {
    if !embedded_ipv4(ip).is_empty() {
        return blocked_embedded(ip).map(|(_, range)| range);
    }
    let bits = u128::from(ip);
    if bits == 0 {
        return Some(BlockedRange::Ipv6Unspecified);
    }
    if bits == 1 {
        return Some(BlockedRange::Ipv6Loopback);
    }
    const RANGES: [(u128, u32, BlockedRange); 8] = [
        (0, 96, BlockedRange::Ipv4Compatible),
        (0x0064_ff9b_0001 << 80, 48, BlockedRange::Nat64LocalUse),
        (0x0100 << 112, 64, BlockedRange::Ipv6Discard),
        (0x2001_0db8 << 96, 32, BlockedRange::Ipv6Documentation),
        (0xfc00 << 112, 7, BlockedRange::Ipv6UniqueLocal),
        (0xfe80 << 112, 10, BlockedRange::Ipv6LinkLocal),
        (0xfec0 << 112, 10, BlockedRange::Ipv6SiteLocal),
        (0xff00 << 112, 8, BlockedRange::Ipv6Multicast),
    ];
    RANGES
        .iter()
        .find(|(network, len, _)| bits >> (128 - len) == network >> (128 - len))
        .map(|&(_, _, range)| range)
}

/// Why the egress guard refused a host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EgressRefusal {
    /// The host resolved to no address at all.
    #[error("{host} resolved to no address")]
    NoAddress {
        /// The host as the caller gave it.
        host: String,
    },
    /// One of the host's addresses lies in a blocked range. One is enough: a connection
    /// may go to any of them, and a name whose answers mix public and private addresses
    /// is how DNS rebinding slips past a check of only the first.
    #[error("{}", describe_blocked(host, *address, *range))]
    Blocked {
        /// The host as the caller gave it (a name or an IP literal).
        host: String,
        /// The refused address.
        address: IpAddr,
        /// The range it lies in.
        range: BlockedRange,
    },
}

/// E.g. `127.0.0.1 (resolved from localhost) is loopback (127.0.0.0/8)`, or for a mapped
/// literal `::ffff:10.0.0.1 stands for 10.0.0.1, which is a private network (10.0.0.0/8)`.
fn describe_blocked(host: &str, address: IpAddr, range: BlockedRange) -> String {
    let mut text = address.to_string();
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    if literal.parse::<IpAddr>() != Ok(address) {
        text.push_str(&format!(" (resolved from {host})"));
    }
    let embedded = match address {
        IpAddr::V6(v6) => blocked_embedded(v6).map(|(v4, _)| v4),
        IpAddr::V4(_) => None,
    };
    match embedded {
        Some(v4) => text.push_str(&format!(" stands for {v4}, which is {range}")),
        None => text.push_str(&format!(" is {range}")),
    }
    text
}

/// Checks the addresses `host` resolved to and returns the one to connect to (the first).
///
/// Every address must be allowed, not just the first: see [`EgressRefusal::Blocked`].
/// With `allow_private` (the operator's `MAILROOM_ALLOW_PRIVATE_EGRESS=true`, for
/// self-hosted relays on a private network and for tests on loopback) any address passes.
///
/// # Errors
/// [`EgressRefusal::NoAddress`] for an empty list (even with `allow_private`), and
/// [`EgressRefusal::Blocked`] naming the first blocked address.
pub fn check_addresses(
    host: &str,
    addresses: &[IpAddr],
    allow_private: bool,
) -> Result<IpAddr, EgressRefusal> {
    let Some(&first) = addresses.first() else {
        return Err(EgressRefusal::NoAddress {
            host: host.to_owned(),
        });
    };
    if !allow_private {
        for &address in addresses {
            if let Some(range) = blocked_range(address) {
                return Err(EgressRefusal::Blocked {
                    host: host.to_owned(),
                    address,
                    range,
                });
            }
        }
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::BlockedRange::*;
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn range(text: &str) -> Option<BlockedRange> {
        blocked_range(ip(text))
    }

    #[test]
    fn every_ipv4_range_is_blocked_at_both_ends() {
        let cases = [
            ("0.0.0.0", "0.255.255.255", ThisNetwork),
            ("127.0.0.0", "127.255.255.255", Loopback),
            ("10.0.0.0", "10.255.255.255", Private10),
            ("172.16.0.0", "172.31.255.255", Private172),
            ("192.168.0.0", "192.168.255.255", Private192),
            ("100.64.0.0", "100.127.255.255", SharedAddressSpace),
            ("169.254.0.0", "169.254.255.255", LinkLocal),
            ("192.0.0.0", "192.0.0.255", IetfProtocolAssignments),
            ("192.0.2.0", "192.0.2.255", Documentation1),
            ("198.51.100.0", "198.51.100.255", Documentation2),
            ("203.0.113.0", "203.0.113.255", Documentation3),
            ("198.18.0.0", "198.19.255.255", Benchmarking),
            ("224.0.0.0", "239.255.255.255", Multicast),
            ("240.0.0.0", "255.255.255.254", Reserved),
            ("255.255.255.255", "255.255.255.255", Broadcast),
        ];
        for (low, high, expected) in cases {
            assert_eq!(range(low), Some(expected), "{low}");
            assert_eq!(range(high), Some(expected), "{high}");
        }
        assert_eq!(range("169.254.169.254"), Some(LinkLocal));
        assert_eq!(range("127.0.0.1"), Some(Loopback));
    }

    #[test]
    fn neighbours_of_the_ipv4_ranges_are_public() {
        for text in [
            "1.0.0.0",
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "126.255.255.255",
            "128.0.0.0",
            "169.253.255.255",
            "169.255.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.1.0",
            "192.0.3.0",
            "192.167.255.255",
            "192.169.0.0",
            "198.17.255.255",
            "198.20.0.0",
            "198.51.99.255",
            "198.51.101.0",
            "203.0.112.255",
            "203.0.114.0",
            "223.255.255.255",
        ] {
            assert_eq!(range(text), None, "{text}");
        }
    }

    #[test]
    fn every_ipv6_range_is_blocked() {
        let cases = [
            ("::", Ipv6Unspecified),
            ("::1", Ipv6Loopback),
            ("::2", Ipv4Compatible),
            ("::808:808", Ipv4Compatible),
            ("100::", Ipv6Discard),
            ("100::ffff:ffff:ffff:ffff", Ipv6Discard),
            ("2001:db8::", Ipv6Documentation),
            ("2001:db8:ffff::1", Ipv6Documentation),
            ("fc00::", Ipv6UniqueLocal),
            ("fdff:ffff::1", Ipv6UniqueLocal),
            ("fe80::", Ipv6LinkLocal),
            ("febf:ffff::1", Ipv6LinkLocal),
            ("fec0::", Ipv6SiteLocal),
            ("feff:ffff::1", Ipv6SiteLocal),
            ("ff00::", Ipv6Multicast),
            ("ff02::1", Ipv6Multicast),
        ];
        for (text, expected) in cases {
            assert_eq!(range(text), Some(expected), "{text}");
        }
        for text in ["100:0:0:1::", "2001:db9::1", "fbff::1", "2606:4700::1111"] {
            assert_eq!(range(text), None, "{text}");
        }
    }

    #[test]
    fn mapped_and_nat64_forms_are_judged_by_their_ipv4_address() {
        assert_eq!(range("::ffff:127.0.0.1"), Some(Loopback));
        assert_eq!(range("::ffff:10.0.0.1"), Some(Private10));
        assert_eq!(range("::ffff:169.254.169.254"), Some(LinkLocal));
        assert_eq!(range("::ffff:0.0.0.0"), Some(ThisNetwork));
        assert_eq!(range("64:ff9b::127.0.0.1"), Some(Loopback));
        assert_eq!(range("64:ff9b::192.168.1.1"), Some(Private192));
        assert_eq!(range("::ffff:8.8.8.8"), None);
        assert_eq!(range("64:ff9b::8.8.8.8"), None);
        assert_eq!(
            embedded_ipv4("::ffff:1.2.3.4".parse().unwrap()),
            [Ipv4Addr::new(1, 2, 3, 4)]
        );
        assert!(embedded_ipv4("2606:4700::1111".parse().unwrap()).is_empty());
    }

    #[test]
    fn six_to_four_is_judged_by_the_ipv4_address_in_bits_16_to_47() {
        // 2002:7f00:1:: carries 127.0.0.1, 2002:a9fe:a9fe:: the metadata service.
        assert_eq!(range("2002:7f00:1::"), Some(Loopback));
        assert_eq!(
            range("2002:7f00:1:ffff:ffff:ffff:ffff:ffff"),
            Some(Loopback)
        );
        assert_eq!(range("2002:a9fe:a9fe::1"), Some(LinkLocal));
        assert_eq!(range("2002:c0a8:101::"), Some(Private192));
        assert_eq!(range("2002:a00:1::"), Some(Private10));
        // 2002:808:808:: carries 8.8.8.8.
        assert_eq!(range("2002:808:808::1"), None);
        assert_eq!(
            check_addresses("2002:7f00:1::", &[ip("2002:7f00:1::")], false)
                .unwrap_err()
                .to_string(),
            "2002:7f00:1:: stands for 127.0.0.1, which is loopback (127.0.0.0/8)"
        );
    }

    #[test]
    fn teredo_is_judged_by_the_inverted_client_and_the_server_ipv4_addresses() {
        // Client 127.0.0.1 inverted is 80ff:fffe; the server 65.54.227.120 is public.
        assert_eq!(
            range("2001:0:4136:e378:8000:63bf:80ff:fffe"),
            Some(Loopback)
        );
        // Client 10.0.0.1 inverted is f5ff:fffe.
        assert_eq!(range("2001:0:4136:e378::f5ff:fffe"), Some(Private10));
        // Client 169.254.169.254 inverted is 5601:5601.
        assert_eq!(range("2001:0:4136:e378::5601:5601"), Some(LinkLocal));
        // Server 192.168.1.1 (c0a8:101), client 8.8.8.8 (f7f7:f7f7) public.
        assert_eq!(range("2001:0:c0a8:101::f7f7:f7f7"), Some(Private192));
        // Server 65.54.227.120 and client 8.8.8.8: both public.
        assert_eq!(range("2001:0:4136:e378:8000:63bf:f7f7:f7f7"), None);
        // The last 32 bits taken as they are (not inverted) would be 127.0.0.1; inverted
        // they are 128.255.255.254, which is public.
        assert_eq!(range("2001:0:4136:e378::7f00:1"), None);
        assert_eq!(
            embedded_ipv4("2001:0:4136:e378::f5ff:fffe".parse().unwrap()),
            [Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(65, 54, 227, 120)]
        );
        assert_eq!(
            check_addresses("t.example", &[ip("2001:0:c0a8:101::f7f7:f7f7")], false)
                .unwrap_err()
                .to_string(),
            "2001:0:c0a8:101::f7f7:f7f7 (resolved from t.example) stands for 192.168.1.1, \
             which is a private network (192.168.0.0/16)"
        );
    }

    #[test]
    fn nat64_local_use_is_refused_whole_and_the_well_known_prefix_by_its_ipv4_address() {
        assert_eq!(range("64:ff9b:1::"), Some(Nat64LocalUse));
        assert_eq!(range("64:ff9b:1::808:808"), Some(Nat64LocalUse));
        assert_eq!(
            range("64:ff9b:1:ffff:ffff:ffff:ffff:ffff"),
            Some(Nat64LocalUse)
        );
        assert_eq!(range("64:ff9b:2::"), None);
        assert_eq!(range("64:ff9b::a9fe:a9fe"), Some(LinkLocal));
        assert_eq!(range("64:ff9b::a00:1"), Some(Private10));
        assert_eq!(range("64:ff9b::808:808"), None);
        assert_eq!(
            Nat64LocalUse.to_string(),
            "local-use NAT64 (64:ff9b:1::/48)"
        );
    }

    #[test]
    fn siit_translated_addresses_are_judged_by_their_ipv4_address() {
        // ::ffff:0:a.b.c.d, one 16-bit group after `ffff` compared with the mapped form.
        assert_eq!(range("::ffff:0:127.0.0.1"), Some(Loopback));
        assert_eq!(range("::ffff:0:a9fe:a9fe"), Some(LinkLocal));
        assert_eq!(range("::ffff:0:172.16.0.1"), Some(Private172));
        assert_eq!(range("::ffff:0:8.8.8.8"), None);
        assert_eq!(
            embedded_ipv4("::ffff:0:10.1.2.3".parse().unwrap()),
            [Ipv4Addr::new(10, 1, 2, 3)]
        );
    }

    #[test]
    fn public_addresses_pass() {
        for text in ["8.8.8.8", "93.184.216.34", "2606:4700::1111", "1.1.1.1"] {
            assert_eq!(range(text), None, "{text}");
            assert_eq!(
                check_addresses("example.com", &[ip(text)], false),
                Ok(ip(text))
            );
        }
    }

    #[test]
    fn one_blocked_address_refuses_the_host() {
        let addresses = [ip("93.184.216.34"), ip("127.0.0.1")];
        let refusal = check_addresses("rebind.example", &addresses, false).unwrap_err();
        assert_eq!(
            refusal,
            EgressRefusal::Blocked {
                host: "rebind.example".into(),
                address: ip("127.0.0.1"),
                range: Loopback,
            }
        );
        assert_eq!(
            refusal.to_string(),
            "127.0.0.1 (resolved from rebind.example) is loopback (127.0.0.0/8)"
        );
    }

    #[test]
    fn allow_private_passes_anything_but_an_empty_list() {
        let addresses = [ip("10.0.0.1"), ip("8.8.8.8")];
        assert_eq!(
            check_addresses("relay.internal", &addresses, true),
            Ok(ip("10.0.0.1"))
        );
        for allow in [false, true] {
            let refusal = check_addresses("nowhere.example", &[], allow).unwrap_err();
            assert_eq!(
                refusal.to_string(),
                "nowhere.example resolved to no address"
            );
        }
    }

    #[test]
    fn messages_read_well_for_literals_and_mapped_forms() {
        let message = |host: &str| {
            check_addresses(host, &[ip(host)], false)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(message("127.0.0.1"), "127.0.0.1 is loopback (127.0.0.0/8)");
        assert_eq!(
            message("169.254.169.254"),
            "169.254.169.254 is link-local (169.254.0.0/16, \
             incl. the cloud metadata service 169.254.169.254)"
        );
        assert_eq!(
            message("::ffff:10.0.0.1"),
            "::ffff:10.0.0.1 stands for 10.0.0.1, which is a private network (10.0.0.0/8)"
        );
        assert_eq!(message("fe80::1"), "fe80::1 is link-local (fe80::/10)");
        let refusal = check_addresses("localhost", &[ip("::1")], false).unwrap_err();
        assert_eq!(
            refusal.to_string(),
            "::1 (resolved from localhost) is loopback (::1)"
        );
    }
}
