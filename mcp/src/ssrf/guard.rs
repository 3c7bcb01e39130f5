//! [`Guard`]: what `reliable_http_call` may reach, and [`Refusal`]: why it may not.
//!
//! A URL passes when its scheme is http or https and its host, if an IP literal, is public or on
//! the operator's allow-list. Host names are judged later, address by address, by the
//! [resolver](super::resolver), because only the resolver sees the addresses that will be dialled.
//!
//! ```
//! use reliable_mcp::ssrf::{AllowList, Guard};
//!
//! let guard = Guard::new(AllowList::parse(&["127.0.0.1"]).unwrap());
//! assert!(guard.check_url(&"http://127.0.0.1:8080/".parse().unwrap()).is_ok());
//! assert!(guard.check_url(&"http://127.0.0.2/".parse().unwrap()).is_err());
//! assert!(guard.check_url(&"file:///etc/passwd".parse().unwrap()).is_err());
//! // The url crate reads 2130706433 as 127.0.0.1, so this is the literal 127.0.0.1: allowed too.
//! assert!(guard.check_url(&"http://2130706433/".parse().unwrap()).is_ok());
//! ```

use std::net::IpAddr;

use url::{Host, Url};

use super::addr::{Class, classify};

/// Addresses the operator allows although they are not public: single addresses or CIDR blocks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowList {
    entries: Vec<(IpAddr, u8)>,
}

impl AllowList {
    /// An empty list: only public addresses are reachable.
    pub fn none() -> Self {
        AllowList::default()
    }

    /// Parses entries such as `127.0.0.1`, `10.1.0.0/16` or `::1`. The error names the bad entry.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, String> {
        let mut out = Vec::with_capacity(entries.len());
        for e in entries {
            let e = e.as_ref().trim();
            let (ip, len) = match e.split_once('/') {
                Some((ip, len)) => (ip, Some(len)),
                None => (e, None),
            };
            let ip: IpAddr = ip
                .parse()
                .map_err(|_| format!("allow-list entry {e:?}: not an IP address or CIDR block"))?;
            let ip = ip.to_canonical();
            let max = if ip.is_ipv4() { 32 } else { 128 };
            let len = match len {
                None => max,
                Some(l) => l.parse::<u8>().ok().filter(|&l| l <= max).ok_or_else(|| {
                    format!("allow-list entry {e:?}: prefix length must be 0..={max}")
                })?,
            };
            out.push((ip, len));
        }
        Ok(AllowList { entries: out })
    }

    /// Whether `ip` (or the IPv4 address an IPv4-mapped `ip` carries) is on the list.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.entries.iter().any(|&(net, len)| match (ip, net) {
            (IpAddr::V4(a), IpAddr::V4(n)) => {
                prefix_eq(u128::from(u32::from(a)), u128::from(u32::from(n)), len, 32)
            }
            (IpAddr::V6(a), IpAddr::V6(n)) => prefix_eq(u128::from(a), u128::from(n), len, 128),
            _ => false,
        })
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn prefix_eq(a: u128, n: u128, len: u8, bits: u32) -> bool {
    let len = u32::from(len);
    len == 0 || (a ^ n) >> (bits - len) == 0
}

/// Why a request was not sent (or a redirect not followed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Not http or https.
    Scheme(String),
    /// The URL has no host.
    NoHost,
    /// The URL carries a user name or password.
    Userinfo,
    /// An IP-literal host that is not public and not allow-listed.
    Address {
        /// The address.
        ip: IpAddr,
        /// Its range.
        class: Class,
    },
    /// A host name with an address that is not public and not allow-listed (the whole name is
    /// refused, whatever its other addresses).
    Name {
        /// The name.
        name: String,
        /// The first offending address.
        ip: IpAddr,
        /// Its range.
        class: Class,
    },
    /// The name did not resolve (or resolved to nothing).
    Unresolved {
        /// The name.
        name: String,
        /// What the resolver said.
        why: String,
    },
    /// More redirects than allowed.
    TooManyRedirects(usize),
    /// A redirect that was not followed.
    Redirect {
        /// Where it pointed, without credentials and capped.
        to: String,
        /// Why it was refused.
        why: Box<Refusal>,
    },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Scheme(s) => write!(f, "refused: scheme {s} (only http and https)"),
            Refusal::NoHost => f.write_str("refused: the URL has no host"),
            Refusal::Userinfo => f.write_str(
                "refused: the URL carries credentials (user or password before '@'); pass credentials \
                 as a header instead (Authorization: Basic <base64 of user:password>, or Bearer <token>), \
                 which is sent but never echoed",
            ),
            Refusal::Address { ip, class } => write!(
                f,
                "refused: {ip} is not a public address ({class}); an operator can allow it with --allow-ip"
            ),
            Refusal::Name { name, ip, class } => write!(
                f,
                "refused: {name} resolves to {ip}, which is not a public address ({class}); the whole name is refused"
            ),
            Refusal::Unresolved { name, why } => {
                write!(f, "refused: {name} did not resolve: {why}")
            }
            Refusal::TooManyRedirects(n) => write!(f, "refused: more than {n} redirects"),
            Refusal::Redirect { to, why } => {
                let why = why.to_string();
                let why = why.strip_prefix("refused: ").unwrap_or(&why);
                write!(f, "refused: redirect to {to} not followed: {why}")
            }
        }
    }
}

impl std::error::Error for Refusal {}

/// The SSRF policy: public addresses, plus the operator's allow-list.
#[derive(Clone, Debug, Default)]
pub struct Guard {
    allow: AllowList,
}

impl Guard {
    /// A guard allowing public addresses and `allow`.
    pub fn new(allow: AllowList) -> Self {
        Guard { allow }
    }

    /// The operator's allow-list.
    pub fn allow_list(&self) -> &AllowList {
        &self.allow
    }

    /// `Ok` if `ip` may be dialled; otherwise its range.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), Class> {
        match classify(ip) {
            Class::Public => Ok(()),
            _ if self.allow.contains(ip) => Ok(()),
            class => Err(class),
        }
    }

    /// Checks the scheme and, for an IP-literal host, the address. Host names pass here and are
    /// checked by the resolver.
    pub fn check_url(&self, url: &Url) -> Result<(), Refusal> {
        match url.scheme() {
            "http" | "https" => {}
            other => return Err(Refusal::Scheme(crate::echo::quoted(other))),
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Refusal::Userinfo);
        }
        let ip = match url.host() {
            None => return Err(Refusal::NoHost),
            Some(Host::Domain(_)) => return Ok(()),
            Some(Host::Ipv4(v4)) => IpAddr::V4(v4),
            Some(Host::Ipv6(v6)) => IpAddr::V6(v6),
        };
        self.check_ip(ip)
            .map_err(|class| Refusal::Address { ip, class })
    }

    /// Checks every address of `name`: all must be allowed.
    pub fn check_name(&self, name: &str, ips: &[IpAddr]) -> Result<(), Refusal> {
        if ips.is_empty() {
            return Err(Refusal::Unresolved {
                name: name.to_string(),
                why: "no addresses".into(),
            });
        }
        for &ip in ips {
            self.check_ip(ip).map_err(|class| Refusal::Name {
                name: name.to_string(),
                ip,
                class,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        s.parse().unwrap()
    }

    #[test]
    fn schemes_other_than_http_and_https_are_refused() {
        let g = Guard::default();
        for u in [
            "file:///etc/passwd",
            "ftp://example.com/",
            "gopher://example.com/",
            "data:text/plain,hi",
        ] {
            assert!(
                matches!(
                    g.check_url(&url(u)),
                    Err(Refusal::Scheme(_)) | Err(Refusal::NoHost)
                ),
                "{u}"
            );
        }
        assert!(g.check_url(&url("https://example.com/")).is_ok());
    }

    #[test]
    fn credentials_in_the_url_are_refused() {
        let g = Guard::default();
        for u in [
            "https://user:pw@example.com/",
            "https://token@example.com/",
            "https://:pw@example.com/",
        ] {
            let e = g.check_url(&url(u)).unwrap_err();
            assert_eq!(e, Refusal::Userinfo, "{u}");
            assert!(e.to_string().contains("as a header"), "{e}");
        }
    }

    #[test]
    fn literal_hosts_in_every_spelling_are_checked() {
        let g = Guard::default();
        // Decimal, hex, octal and short forms all parse to 127.0.0.1; IPv6 forms carry it.
        for u in [
            "http://127.0.0.1/",
            "http://2130706433/",
            "http://0x7f000001/",
            "http://0177.0.0.1/",
            "http://127.1/",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:7f00:1]/",
            "http://169.254.169.254/latest/meta-data/",
            "http://[64:ff9b::a9fe:a9fe]/",
            "http://0.0.0.0:8080/",
        ] {
            assert!(
                matches!(g.check_url(&url(u)), Err(Refusal::Address { .. })),
                "{u}"
            );
        }
        assert!(g.check_url(&url("http://8.8.8.8/")).is_ok());
    }

    #[test]
    fn the_allow_list_admits_exactly_its_entries() {
        let g = Guard::new(AllowList::parse(&["127.0.0.1", "10.1.0.0/16", "fd00::/8"]).unwrap());
        assert!(g.check_url(&url("http://127.0.0.1:9/")).is_ok());
        assert!(
            g.check_url(&url("http://[::ffff:127.0.0.1]/")).is_ok(),
            "mapped form of an allowed address"
        );
        assert!(g.check_url(&url("http://127.0.0.2/")).is_err());
        assert!(g.check_url(&url("http://10.1.255.255/")).is_ok());
        assert!(g.check_url(&url("http://10.2.0.0/")).is_err());
        assert!(g.check_url(&url("http://[fd12::1]/")).is_ok());
        assert!(g.check_url(&url("http://[::1]/")).is_err());
    }

    #[test]
    fn bad_allow_list_entries_are_named() {
        assert!(
            AllowList::parse(&["localhost"])
                .unwrap_err()
                .contains("\"localhost\"")
        );
        assert!(
            AllowList::parse(&["10.0.0.0/33"])
                .unwrap_err()
                .contains("0..=32")
        );
        assert!(
            AllowList::parse(&["::/129"])
                .unwrap_err()
                .contains("0..=128")
        );
    }

    #[test]
    fn a_name_is_refused_whole_if_any_address_is_not_allowed() {
        let g = Guard::default();
        let ips: Vec<IpAddr> = vec!["8.8.8.8".parse().unwrap(), "10.0.0.1".parse().unwrap()];
        let err = g.check_name("rebind.example", &ips).unwrap_err();
        assert!(
            err.to_string()
                .contains("rebind.example resolves to 10.0.0.1"),
            "{err}"
        );
        assert!(g.check_name("ok.example", &ips[..1]).is_ok());
        assert!(matches!(
            g.check_name("empty.example", &[]),
            Err(Refusal::Unresolved { .. })
        ));
    }
}
