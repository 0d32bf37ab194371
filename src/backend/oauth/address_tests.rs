//! Tests of `address.rs`: the classifier, the policy, and the refusal before any connection (a loopback listener
//! that must see none).

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::super::http::{Failed, Http, HttpLimits};
use super::*;

fn ip(text: &str) -> IpAddr {
    text.parse().expect("an address")
}

fn url(text: &str) -> Url {
    Url::parse(text).expect("a URL")
}

#[test]
fn addresses_are_classified() {
    use AddressClass::*;
    for (address, class) in [
        ("127.0.0.1", Loopback),
        ("127.255.0.9", Loopback),
        ("::1", Loopback),
        ("10.1.2.3", Private),
        ("172.16.0.1", Private),
        ("172.31.255.255", Private),
        ("192.168.1.1", Private),
        ("100.64.0.1", Private),
        ("fd12:3456::1", Private),
        ("fc00::1", Private),
        ("169.254.169.254", Forbidden),
        ("fe80::1", Forbidden),
        ("febf::1", Forbidden),
        ("0.0.0.0", Forbidden),
        ("0.1.2.3", Forbidden),
        ("::", Forbidden),
        ("224.0.0.1", Forbidden),
        ("239.255.255.250", Forbidden),
        ("ff02::1", Forbidden),
        ("255.255.255.255", Forbidden),
        ("240.0.0.1", Forbidden),
        ("8.8.8.8", Public),
        ("172.32.0.1", Public),
        ("100.128.0.1", Public),
        ("2606:4700::1111", Public),
        // IPv6 forms of IPv4 addresses are their IPv4.
        ("::ffff:169.254.169.254", Forbidden),
        ("::ffff:127.0.0.1", Loopback),
        ("::ffff:10.0.0.1", Private),
        ("::ffff:8.8.8.8", Public),
        ("::169.254.169.254", Forbidden),
        ("64:ff9b::a9fe:a9fe", Forbidden),
        ("64:ff9b::7f00:1", Loopback),
    ] {
        assert_eq!(AddressClass::of(ip(address)), class, "{address}");
    }
    let mapped = Ipv4Addr::new(169, 254, 1, 1).to_ipv6_mapped();
    assert_eq!(AddressClass::of(IpAddr::V6(mapped)), Forbidden);
}

#[tokio::test]
async fn internal_classes_follow_the_backend_or_allow_internal() {
    let loopback_backend = AddressPolicy::new(&url("http://127.0.0.1:9000/mcp"), false);
    let private_backend = AddressPolicy::new(&url("https://10.0.0.5/mcp"), false);
    let public_backend = AddressPolicy::new(&url("https://93.184.215.14/mcp"), false);
    let allowed = AddressPolicy::new(&url("https://93.184.215.14/mcp"), true);
    async fn check(policy: &AddressPolicy, address: &str) -> bool {
        policy.check("as.example", &[ip(address)]).await.is_ok()
    }
    assert!(check(&loopback_backend, "127.0.0.1").await && check(&loopback_backend, "::1").await);
    assert!(!check(&loopback_backend, "10.0.0.1").await, "a loopback backend does not open private networks");
    assert!(check(&private_backend, "192.168.0.10").await && check(&private_backend, "fd00::5").await);
    assert!(!check(&private_backend, "127.0.0.1").await, "a private backend does not open loopback");
    for address in ["127.0.0.1", "10.0.0.1", "fd00::1"] {
        assert!(!check(&public_backend, address).await, "{address} from a public backend");
        assert!(check(&allowed, address).await, "{address} with allow_internal");
    }
    for policy in [&loopback_backend, &private_backend, &public_backend, &allowed] {
        assert!(check(policy, "8.8.8.8").await, "public addresses are always allowed");
        for never in ["169.254.169.254", "fe80::1", "0.0.0.0", "224.0.0.1", "255.255.255.255", "::ffff:169.254.1.1"] {
            assert!(!check(policy, never).await, "{never} is never allowed");
        }
    }
    let refused = allowed.check("as.example", &[ip("8.8.8.8"), ip("169.254.169.254")]).await.expect_err("one bad");
    assert_eq!(
        refused.to_string(),
        "the address 169.254.169.254 of as.example is not allowed (link-local, unspecified, multicast or reserved)"
    );
    let localhost = allowed.check("localhost", &[ip("10.0.0.1")]).await.expect_err("localhost elsewhere");
    assert!(localhost.to_string().contains("a localhost name must resolve to loopback"), "{localhost}");
}

#[tokio::test]
async fn plain_http_is_only_for_loopback_hosts() {
    let policy = AddressPolicy::new(&url("https://93.184.215.14/mcp"), true);
    for allowed in ["https://as.example.com/token", "http://localhost:8080/t", "http://127.0.0.1/t", "http://[::1]/t"] {
        assert_eq!(policy.check_url(&url(allowed)).await, Ok(()), "{allowed}");
    }
    for refused in ["http://as.example.com/token", "http://10.0.0.1/t", "http://[fd00::1]/t"] {
        assert_eq!(policy.check_url(&url(refused)).await, Err(Refused::PlainHttp), "{refused}");
    }
    let literal = policy.check_url(&url("https://169.254.169.254/latest")).await.expect_err("link-local literal");
    assert!(matches!(literal, Refused::Address { .. }), "{literal}");
}

/// A listener that counts the connections it accepts.
async fn counting_listener() -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("address").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((_stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
        }
    });
    (port, accepted)
}

#[tokio::test]
async fn a_refused_address_is_never_connected_to() {
    let (port, accepted) = counting_listener().await;
    let limits = HttpLimits { timeout: Duration::from_secs(5), max_body: 1024 };
    // The backend is on a public address: loopback is not its network.
    let http = Http::new(limits, AddressPolicy::new(&url("https://93.184.215.14/mcp"), false)).expect("client");
    // A name: refused by the resolver, on the addresses it resolved to.
    let named = http.get(&url(&format!("http://localhost:{port}/.well-known/oauth-authorization-server"))).await;
    let Err(Failed::Refused(Refused::Address { host, address, .. })) = named else {
        panic!("refused by the resolver: {named:?}");
    };
    assert_eq!(host, "localhost");
    assert_eq!(AddressClass::of(address), AddressClass::Loopback);
    // A literal: refused before any resolver.
    let literal = http.get(&url(&format!("http://127.0.0.1:{port}/token"))).await;
    assert!(matches!(literal, Err(Failed::Refused(Refused::Address { .. }))), "{literal:?}");
    let error =
        literal.expect_err("refused").error("the token endpoint", &url(&format!("http://127.0.0.1:{port}/token")));
    let message = error.to_string();
    assert!(
        message.contains(&format!("http://127.0.0.1:{port}/token")) && message.contains("is not allowed"),
        "{message}"
    );
    assert!(message.contains("nothing was sent"), "{message}");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 0, "no connection was made");

    // The same listener is reached when the backend is on loopback too: the refusal was the policy's.
    let local = Http::new(limits, AddressPolicy::new(&url("http://127.0.0.1:1/mcp"), false)).expect("client");
    let reached = local.get(&url(&format!("http://localhost:{port}/x"))).await;
    assert!(!matches!(reached, Err(Failed::Refused(_))), "{reached:?}");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(accepted.load(Ordering::SeqCst) >= 1, "the loopback backend's exchanges reach loopback");
}

/// A network namespace of the test's own, deleted when dropped.
struct Netns(String);

impl Netns {
    fn ip(&self, args: &[&str]) -> bool {
        let status = std::process::Command::new("ip").arg("-n").arg(&self.0).args(args).status();
        status.is_ok_and(|status| status.success())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// In a namespace of its own (so the host's network is untouched), link-local and private addresses that are
/// really reachable are refused before any connection when the backend is on loopback.
#[test]
fn in_a_private_network_namespace_internal_addresses_are_refused_before_any_connection() {
    if !crate::sys::testing::is_root() {
        println!("skipped: a network namespace needs root");
        return;
    }
    let namespace = Netns(format!("sy-oauth-{}", std::process::id()));
    let added = std::process::Command::new("ip").args(["netns", "add", &namespace.0]).status();
    if !added.is_ok_and(|status| status.success()) {
        println!("skipped: `ip netns add` is not available here");
        return;
    }
    let addresses = ["169.254.77.2", "10.77.0.2"];
    assert!(namespace.ip(&["link", "set", "lo", "up"]), "lo up");
    for address in addresses {
        assert!(namespace.ip(&["addr", "add", &format!("{address}/32"), "dev", "lo"]), "{address}");
    }
    let path = format!("/run/netns/{}", namespace.0);
    let inside = std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(&path).expect("the namespace file");
        // Only this thread moves into the namespace.
        assert!(crate::sys::testing::enter_network_namespace(file.as_raw_fd()), "setns");
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(refused_inside(addresses));
    });
    inside.join().expect("the checks inside the namespace passed");
}

async fn refused_inside(addresses: [&str; 2]) {
    let limits = HttpLimits { timeout: Duration::from_secs(2), max_body: 1024 };
    let http = Http::new(limits, AddressPolicy::new(&url("http://127.0.0.1:1/mcp"), false)).expect("client");
    let plain = reqwest::Client::builder().no_proxy().timeout(Duration::from_millis(500)).build().expect("client");
    for address in addresses {
        let listener = tokio::net::TcpListener::bind((address, 0)).await.expect("bind inside the namespace");
        let port = listener.local_addr().expect("address").port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&accepted);
        let task = tokio::spawn(async move {
            while let Ok((_stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
            }
        });
        let refused = http.get(&url(&format!("https://{address}:{port}/.well-known/oauth-authorization-server"))).await;
        assert!(matches!(refused, Err(Failed::Refused(Refused::Address { .. }))), "{address}: {refused:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(accepted.load(Ordering::SeqCst), 0, "{address}: nothing connected");
        // The address is reachable: a client without the policy gets through.
        let _ = plain.get(format!("http://{address}:{port}/")).send().await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "{address} is reachable inside the namespace");
        task.abort();
    }
}
