//! Where the OAuth client may connect: every discovery, metadata, registration and token URL is filtered here,
//! before anything is sent (MCP 2025-11-25 authorization, "Communication Security": authorization server
//! endpoints MUST be HTTPS; the SSRF advice of the MCP security best practices).
//!
//! Rules:
//! - Scheme: `https`; plain `http` only to a loopback host (`localhost`, `*.localhost` or a loopback literal).
//! - Addresses are checked on what is actually connected to: the HTTP client resolves names through
//!   [`GuardedResolver`], which refuses the whole answer when any address in it is not allowed (no separate
//!   lookup, so no window between check and connect); IP literals never reach a resolver and are checked by
//!   [`AddressPolicy::check_url`].
//! - Classes ([`AddressClass::of`]; an IPv4-mapped, IPv4-compatible or NAT64 IPv6 address is its IPv4):
//!   link-local, unspecified/"this network" (0.0.0.0/8), multicast, broadcast and reserved never; loopback and
//!   private networks (10/8, 172.16/12, 192.168/16, 100.64/10, IPv6 unique-local fc00::/7 and site-local) only
//!   when the backend's own host resolves into the same class, or with `[backends.oauth] allow_internal = true`;
//!   everything else (public) always.
//! - A `localhost` name must resolve to loopback addresses only (RFC 6761 §6.3).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use tokio::sync::OnceCell;

/// What kind of network an address belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    Public,
    Loopback,
    /// RFC 1918, RFC 6598 shared space, and their IPv6 counterparts (RFC 4193 unique-local, site-local): the
    /// addresses of an in-cluster or office network.
    Private,
    /// Never connected to: link-local (cloud metadata services live there), unspecified, multicast, broadcast,
    /// reserved.
    Forbidden,
}

impl AddressClass {
    pub fn of(address: IpAddr) -> AddressClass {
        match address {
            IpAddr::V4(v4) => Self::of_v4(v4),
            IpAddr::V6(v6) => match embedded_v4(v6) {
                Some(v4) => Self::of_v4(v4),
                None => Self::of_v6(v6),
            },
        }
    }

    fn of_v4(address: Ipv4Addr) -> AddressClass {
        let [a, b, ..] = address.octets();
        if address.is_loopback() {
            Self::Loopback
        } else if address.is_private() || (a == 100 && (64..128).contains(&b)) {
            Self::Private
        } else if a == 0 || address.is_link_local() || address.is_multicast() || a >= 240 {
            // 240/4 holds the broadcast address too.
            Self::Forbidden
        } else {
            Self::Public
        }
    }

    fn of_v6(address: Ipv6Addr) -> AddressClass {
        let first = address.segments()[0];
        if address.is_loopback() {
            Self::Loopback
        } else if address.is_unspecified() || address.is_multicast() || first & 0xffc0 == 0xfe80 {
            Self::Forbidden
        } else if first & 0xfe00 == 0xfc00 || first & 0xffc0 == 0xfec0 {
            Self::Private
        } else {
            Self::Public
        }
    }
}

/// The IPv4 address an IPv6 address stands for: IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`,
/// deprecated, other than `::` and `::1`) and the NAT64 well-known prefix (`64:ff9b::/96`, RFC 6052).
fn embedded_v4(address: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = address.to_ipv4_mapped() {
        return Some(v4);
    }
    let segments = address.segments();
    let low = Ipv4Addr::from(((segments[6] as u32) << 16) | segments[7] as u32);
    let compatible = segments[..6].iter().all(|segment| *segment == 0) && !matches!(u32::from(low), 0 | 1);
    let nat64 = segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
    (compatible || nat64).then_some(low)
}

/// Why a URL or an address was refused; nothing was sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the address {address} of {host} is not allowed ({reason})")]
    Address { host: String, address: IpAddr, reason: &'static str },
    #[error("plain http is allowed only to loopback hosts; use https")]
    PlainHttp,
}

/// Which addresses one backend's OAuth exchanges may reach.
#[derive(Debug)]
pub struct AddressPolicy {
    allow_internal: bool,
    /// The backend's own host and port, whose addresses' classes are allowed too.
    backend: (String, u16),
    /// Those classes, once the backend's host has resolved.
    backend_classes: OnceCell<Vec<AddressClass>>,
}

impl AddressPolicy {
    pub fn new(backend_url: &Url, allow_internal: bool) -> AddressPolicy {
        let host = backend_url.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
        let port = backend_url.port_or_known_default().unwrap_or(443);
        AddressPolicy { allow_internal, backend: (host.to_owned(), port), backend_classes: OnceCell::new() }
    }

    /// Refuses a URL whose scheme is not allowed, or whose host is an IP literal that is not.
    pub async fn check_url(&self, url: &Url) -> Result<(), Refused> {
        let host = url.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
        let literal = host.parse::<IpAddr>().ok();
        let loopback_host =
            is_localhost(host) || literal.is_some_and(|ip| AddressClass::of(ip) == AddressClass::Loopback);
        if url.scheme() != "https" && !(url.scheme() == "http" && loopback_host) {
            return Err(Refused::PlainHttp);
        }
        match literal {
            Some(address) => self.check(host, &[address]).await,
            None => Ok(()),
        }
    }

    /// Refuses `addresses` (what `host` resolved to) when any of them is not allowed.
    pub async fn check(&self, host: &str, addresses: &[IpAddr]) -> Result<(), Refused> {
        for &address in addresses {
            let refuse = |reason| Err(Refused::Address { host: host.to_owned(), address, reason });
            match AddressClass::of(address) {
                AddressClass::Forbidden => return refuse("link-local, unspecified, multicast or reserved"),
                class if is_localhost(host) && class != AddressClass::Loopback => {
                    return refuse("a localhost name must resolve to loopback");
                }
                AddressClass::Public => {}
                _ if self.allow_internal => {}
                class if self.backend_classes().await.contains(&class) => {}
                _ => {
                    return refuse(
                        "an internal address, allowed only when the backend itself is in that network or with \
                         `allow_internal = true`",
                    );
                }
            }
        }
        Ok(())
    }

    /// The classes of the backend's own addresses; a failed lookup allows none (and is tried again next time).
    async fn backend_classes(&self) -> &[AddressClass] {
        let resolved = self
            .backend_classes
            .get_or_try_init(|| async {
                let (host, port) = &self.backend;
                let addresses = resolve(host, *port).await.map_err(|_| ())?;
                Ok::<_, ()>(addresses.iter().map(|address| AddressClass::of(address.ip())).collect())
            })
            .await;
        resolved.map_or(&[], Vec::as_slice)
    }
}

fn is_localhost(host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host == "localhost" || host.ends_with(".localhost")
}

async fn resolve(host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
    if let Ok(address) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(address, port)]);
    }
    Ok(tokio::net::lookup_host((host, port)).await?.collect())
}

/// The HTTP client's resolver: the system's answer, refused whole when the policy refuses any address in it.
#[derive(Debug, Clone)]
pub struct GuardedResolver(pub Arc<AddressPolicy>);

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = Arc::clone(&self.0);
        Box::pin(async move {
            let host = name.as_str().to_owned();
            // The port is the URL's: the HTTP client sets it on the addresses returned.
            let addresses = resolve(&host, 0).await?;
            let ips: Vec<IpAddr> = addresses.iter().map(SocketAddr::ip).collect();
            policy.check(&host, &ips).await?;
            Ok(Box::new(addresses.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
#[path = "address_tests.rs"]
mod tests;
