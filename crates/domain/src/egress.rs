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
/// IPv6 forms that carry an IPv4 address are judged by that address: IPv4-mapped
/// `::ffff:a.b.c.d` (the kernel connects to `a.b.c.d` over IPv4) and the NAT64 prefix
/// `64:ff9b::/96` (a translator connects to `a.b.c.d`). So `::ffff:127.0.0.1` is
/// [`BlockedRange::Loopback`], and `::ffff:8.8.8.8` is allowed.
pub fn blocked_range(ip: IpAddr) -> Option<BlockedRange> {
    match ip {
        IpAddr::V4(v4) => blocked_v4(v4),
        IpAddr::V6(v6) => blocked_v6(v6),
    }
}

/// The IPv4 address an IPv6 address stands for, when it is IPv4-mapped (`::ffff:0:0/96`)
/// or NAT64 (`64:ff9b::/96`).
pub fn embedded_ipv4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let tail = || Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    let mapped = s[..5] == [0, 0, 0, 0, 0] && s[5] == 0xffff;
    let nat64 = s[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
    (mapped || nat64).then(tail)
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
    if let Some(v4) = embedded_ipv4(ip) {
        return blocked_v4(v4);
    }
    let bits = u128::from(ip);
    if bits == 0 {
        return Some(BlockedRange::Ipv6Unspecified);
    }
    if bits == 1 {
        return Some(BlockedRange::Ipv6Loopback);
    }
    const RANGES: [(u128, u32, BlockedRange); 7] = [
        (0, 96, BlockedRange::Ipv4Compatible),
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
        IpAddr::V6(v6) => embedded_ipv4(v6),
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
            Some(Ipv4Addr::new(1, 2, 3, 4))
        );
        assert_eq!(embedded_ipv4("2606:4700::1111".parse().unwrap()), None);
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
