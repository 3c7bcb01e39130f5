//! Which IP addresses are public: the pure function every other SSRF check calls.
//!
//! An address is public when it is globally routable unicast. Everything else is refused by
//! default: loopback, private (RFC 1918), shared (RFC 6598), link-local (where cloud metadata
//! services answer, 169.254.169.254), "this network", benchmarking, documentation, reserved,
//! broadcast and multicast, and in IPv6 the unspecified and loopback addresses, unique-local,
//! link-local and site-local, discard, ORCHID, SRv6 and everything outside `2000::/3`.
//!
//! IPv6 forms that carry an IPv4 address (v4-mapped, v4-compatible, NAT64, 6to4, Teredo) are
//! judged by the IPv4 address inside: `::ffff:127.0.0.1` reaches loopback on a dual-stack host and
//! `64:ff9b::a9fe:a9fe` reaches 169.254.169.254 through a NAT64 gateway, so both are refused as
//! what they lead to.
//!
//! ```
//! use reliable_mcp::ssrf::{Class, classify};
//!
//! assert_eq!(classify("93.184.215.14".parse().unwrap()), Class::Public);
//! assert_eq!(classify("169.254.169.254".parse().unwrap()).range(), Some("link-local 169.254.0.0/16"));
//! assert!(!classify("::ffff:10.0.0.1".parse().unwrap()).is_public());
//! ```

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What [`classify`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Globally routable unicast.
    Public,
    /// Not public: the range it is in, e.g. `"loopback 127.0.0.0/8"`.
    NonPublic(&'static str),
    /// An IPv6 form carrying a non-public IPv4 address: the form, the IPv4 address and its range.
    Embedded {
        /// `"v4-mapped"`, `"v4-compatible"`, `"NAT64"`, `"6to4"` or `"Teredo"`.
        form: &'static str,
        /// The IPv4 address inside.
        v4: Ipv4Addr,
        /// The IPv4 address's range.
        range: &'static str,
    },
}

impl Class {
    /// Whether the address is public.
    pub fn is_public(self) -> bool {
        self == Class::Public
    }

    /// The non-public range, if any (for an embedded IPv4 address, its range).
    pub fn range(self) -> Option<&'static str> {
        match self {
            Class::Public => None,
            Class::NonPublic(r) | Class::Embedded { range: r, .. } => Some(r),
        }
    }
}

impl std::fmt::Display for Class {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Class::Public => f.write_str("public"),
            Class::NonPublic(r) => f.write_str(r),
            Class::Embedded { form, v4, range } => write!(f, "{form} address of {v4} ({range})"),
        }
    }
}

/// IPv4 ranges that are not public: (network, prefix length, name). Sources: the IANA IPv4
/// Special-Purpose Address Registry and RFC 6890.
const V4: &[(u32, u8, &str)] = &[
    (0x0000_0000, 8, "\"this network\" 0.0.0.0/8"),
    (0x0A00_0000, 8, "private 10.0.0.0/8"),
    (0x6440_0000, 10, "shared address space 100.64.0.0/10"),
    (0x7F00_0000, 8, "loopback 127.0.0.0/8"),
    (0xA9FE_0000, 16, "link-local 169.254.0.0/16"),
    (0xAC10_0000, 12, "private 172.16.0.0/12"),
    (0xC000_0000, 24, "IETF protocol assignments 192.0.0.0/24"),
    (0xC000_0200, 24, "documentation 192.0.2.0/24"),
    (0xC058_6300, 24, "6to4 relay anycast 192.88.99.0/24"),
    (0xC0A8_0000, 16, "private 192.168.0.0/16"),
    (0xC612_0000, 15, "benchmarking 198.18.0.0/15"),
    (0xC633_6400, 24, "documentation 198.51.100.0/24"),
    (0xCB00_7100, 24, "documentation 203.0.113.0/24"),
    (0xE000_0000, 4, "multicast 224.0.0.0/4"),
    (0xF000_0000, 4, "reserved 240.0.0.0/4 (and broadcast)"),
];

/// IPv6 ranges that are not public, checked after the IPv4-carrying forms. Sources: the IANA IPv6
/// Special-Purpose Address Registry, RFC 9637 and RFC 9602.
const V6: &[(u128, u8, &str)] = &[
    (0x0064_ff9b_0001 << 80, 48, "local-use NAT64 64:ff9b:1::/48"),
    (0x0100 << 112, 64, "discard-only 100::/64"),
    (0x2001_0002 << 96, 48, "benchmarking 2001:2::/48"),
    (0x2001_0010 << 96, 28, "ORCHID 2001:10::/28"),
    (0x2001_0020 << 96, 28, "ORCHIDv2 2001:20::/28"),
    (0x2001_0db8 << 96, 32, "documentation 2001:db8::/32"),
    (0x3fff << 112, 20, "documentation 3fff::/20"),
    (0x5f00 << 112, 16, "SRv6 SIDs 5f00::/16"),
    (0xfc00 << 112, 7, "unique-local fc00::/7"),
    (0xfe80 << 112, 10, "link-local fe80::/10"),
    (0xfec0 << 112, 10, "site-local fec0::/10"),
    (0xff00 << 112, 8, "multicast ff00::/8"),
];

/// Whether `ip` is public, and if not, which range it is in. Pure; dials nothing.
pub fn classify(ip: IpAddr) -> Class {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn in_prefix<T>(addr: T, net: T, len: u8, bits: u32) -> bool
where
    T: Copy + std::ops::BitXor<Output = T> + std::ops::Shr<u32, Output = T> + PartialEq + From<u8>,
{
    let len = u32::from(len);
    len == 0 || (addr ^ net) >> (bits - len) == T::from(0)
}

fn classify_v4(ip: Ipv4Addr) -> Class {
    let a = u32::from(ip);
    V4.iter()
        .find(|&&(net, len, _)| in_prefix(a, net, len, 32))
        .map_or(Class::Public, |&(_, _, name)| Class::NonPublic(name))
}

fn classify_v6(ip: Ipv6Addr) -> Class {
    let a = u128::from(ip);
    if a == 0 {
        return Class::NonPublic("unspecified ::");
    }
    if a == 1 {
        return Class::NonPublic("loopback ::1");
    }
    if let Some((form, v4)) = embedded_v4(a) {
        return match classify_v4(v4) {
            Class::Public => Class::Public,
            other => Class::Embedded {
                form,
                v4,
                range: other.range().unwrap_or("non-public"),
            },
        };
    }
    if let Some(&(_, _, name)) = V6
        .iter()
        .find(|&&(net, len, _)| in_prefix(a, net, len, 128))
    {
        return Class::NonPublic(name);
    }
    // Only 2000::/3 is allocated for global unicast; the rest is reserved or unassigned.
    if !in_prefix(a, 0x2000 << 112, 3, 128) {
        return Class::NonPublic("not global unicast (outside 2000::/3)");
    }
    Class::Public
}

/// The IPv4 address an IPv6 address carries, and the form that carries it.
fn embedded_v4(a: u128) -> Option<(&'static str, Ipv4Addr)> {
    let low32 = Ipv4Addr::from(a as u32);
    if a >> 32 == 0xffff {
        return Some(("v4-mapped", low32)); // ::ffff:0:0/96
    }
    if a >> 32 == 0 {
        return Some(("v4-compatible", low32)); // ::/96 (deprecated), after :: and ::1
    }
    if a >> 32 == 0x0064_ff9b << 64 {
        return Some(("NAT64", low32)); // 64:ff9b::/96
    }
    if a >> 112 == 0x2002 {
        return Some(("6to4", Ipv4Addr::from((a >> 80) as u32))); // 2002:V4ADDR::/48
    }
    if a >> 96 == 0x2001_0000 {
        // Teredo 2001::/32: the client's address is the last 32 bits, inverted.
        return Some(("Teredo", Ipv4Addr::from(!(a as u32))));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(s: &str) -> Class {
        classify(s.parse().unwrap())
    }

    fn range(s: &str) -> &'static str {
        class(s)
            .range()
            .unwrap_or_else(|| panic!("{s} classified as public"))
    }

    #[test]
    fn every_ipv4_range_at_both_ends_and_just_outside() {
        // (first, last, the address just before, the address just after, range name start)
        let cases = [
            (
                "0.0.0.0",
                "0.255.255.255",
                None,
                Some("1.0.0.0"),
                "\"this network\"",
            ),
            (
                "10.0.0.0",
                "10.255.255.255",
                Some("9.255.255.255"),
                Some("11.0.0.0"),
                "private 10.",
            ),
            (
                "100.64.0.0",
                "100.127.255.255",
                Some("100.63.255.255"),
                Some("100.128.0.0"),
                "shared",
            ),
            (
                "127.0.0.0",
                "127.255.255.255",
                Some("126.255.255.255"),
                Some("128.0.0.0"),
                "loopback",
            ),
            (
                "169.254.0.0",
                "169.254.255.255",
                Some("169.253.255.255"),
                Some("169.255.0.0"),
                "link-local",
            ),
            (
                "172.16.0.0",
                "172.31.255.255",
                Some("172.15.255.255"),
                Some("172.32.0.0"),
                "private 172.",
            ),
            (
                "192.0.0.0",
                "192.0.0.255",
                Some("191.255.255.255"),
                Some("192.0.1.0"),
                "IETF",
            ),
            (
                "192.0.2.0",
                "192.0.2.255",
                Some("192.0.1.255"),
                Some("192.0.3.0"),
                "documentation 192.",
            ),
            (
                "192.88.99.0",
                "192.88.99.255",
                Some("192.88.98.255"),
                Some("192.88.100.0"),
                "6to4 relay",
            ),
            (
                "192.168.0.0",
                "192.168.255.255",
                Some("192.167.255.255"),
                Some("192.169.0.0"),
                "private 192.",
            ),
            (
                "198.18.0.0",
                "198.19.255.255",
                Some("198.17.255.255"),
                Some("198.20.0.0"),
                "benchmarking",
            ),
            (
                "198.51.100.0",
                "198.51.100.255",
                Some("198.51.99.255"),
                Some("198.51.101.0"),
                "documentation 198.",
            ),
            (
                "203.0.113.0",
                "203.0.113.255",
                Some("203.0.112.255"),
                Some("203.0.114.0"),
                "documentation 203.",
            ),
            (
                "224.0.0.0",
                "239.255.255.255",
                Some("223.255.255.255"),
                None,
                "multicast",
            ),
            ("240.0.0.0", "255.255.255.255", None, None, "reserved"),
        ];
        for (first, last, before, after, name) in cases {
            for a in [first, last] {
                assert!(range(a).starts_with(name), "{a}: {}", range(a));
            }
            for a in [before, after].into_iter().flatten() {
                assert_eq!(class(a), Class::Public, "{a} is outside {name}");
            }
        }
        assert!(
            range("169.254.169.254").starts_with("link-local"),
            "cloud metadata"
        );
    }

    #[test]
    fn public_ipv4_and_ipv6() {
        for a in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.215.14",
            "2606:4700:4700::1111",
            "2a00:1450::1",
        ] {
            assert_eq!(class(a), Class::Public, "{a}");
        }
    }

    #[test]
    fn every_ipv6_range() {
        let cases = [
            ("::", "unspecified"),
            ("::1", "loopback ::1"),
            ("64:ff9b:1::1", "local-use NAT64"),
            ("100::", "discard"),
            ("100::ffff:ffff:ffff:ffff", "discard"),
            ("2001:2::1", "benchmarking"),
            ("2001:10::1", "ORCHID 2"),
            ("2001:2f::1", "ORCHIDv2"),
            ("2001:db8::1", "documentation 2001"),
            ("2001:db8:ffff::1", "documentation 2001"),
            ("3fff::1", "documentation 3fff"),
            ("3fff:fff::1", "documentation 3fff"),
            ("5f00::1", "SRv6"),
            ("fc00::1", "unique-local"),
            ("fdff:ffff::1", "unique-local"),
            ("fe80::1", "link-local"),
            ("febf::1", "link-local"),
            ("fec0::1", "site-local"),
            ("ff02::1", "multicast"),
            ("::1:0:0:0", "not global"),
            ("4000::1", "not global"),
            ("1000::1", "not global"),
        ];
        for (a, name) in cases {
            assert!(range(a).starts_with(name), "{a}: {}", range(a));
        }
        // Just outside: 3fff:1000:: is past 3fff::/20, fbff:: before fc00::/7.
        assert_eq!(class("3fff:1000::1"), Class::Public);
        assert!(range("fbff::1").starts_with("not global"));
    }

    #[test]
    fn ipv6_forms_are_judged_by_the_ipv4_inside() {
        let cases = [
            ("::ffff:127.0.0.1", "v4-mapped", "127.0.0.1"),
            ("::ffff:169.254.169.254", "v4-mapped", "169.254.169.254"),
            ("::10.0.0.1", "v4-compatible", "10.0.0.1"),
            ("64:ff9b::a9fe:a9fe", "NAT64", "169.254.169.254"),
            ("64:ff9b::192.168.1.1", "NAT64", "192.168.1.1"),
            ("2002:7f00:1::", "6to4", "127.0.0.1"),
            ("2002:0a00:0001::1", "6to4", "10.0.0.1"),
            // Teredo: client 127.0.0.1 is stored inverted as 80ff:fffe.
            (
                "2001:0:4136:e378:8000:63bf:80ff:fffe",
                "Teredo",
                "127.0.0.1",
            ),
            (
                "2001:0:4136:e378:8000:63bf:3fff:fdd2",
                "Teredo",
                "192.0.2.45",
            ),
        ];
        for (a, form, v4) in cases {
            match class(a) {
                Class::Embedded {
                    form: f, v4: got, ..
                } => {
                    assert_eq!((f, got.to_string().as_str()), (form, v4), "{a}");
                }
                other => panic!("{a}: {other:?}"),
            }
        }
        // The same forms around a public address are public.
        for a in [
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "2001:0:4136:e378:8000:63bf:f7f7:f7f7",
        ] {
            assert_eq!(class(a), Class::Public, "{a}");
        }
    }

    #[test]
    fn display_names_the_range() {
        assert_eq!(class("10.1.2.3").to_string(), "private 10.0.0.0/8");
        assert_eq!(
            class("::ffff:127.0.0.1").to_string(),
            "v4-mapped address of 127.0.0.1 (loopback 127.0.0.0/8)"
        );
    }
}
