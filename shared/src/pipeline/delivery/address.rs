//! Where a webhook may point (SSRF): public addresses over https; private, loopback,
//! link-local and other special ranges only for hosts named in `TRIAGE_WEBHOOK_ALLOWED_HOSTS`,
//! and plain http only to loopback. Pure functions of the URL, the addresses it resolves to
//! and the allow-list; the webhook client's resolver applies [`check_addresses`] to every
//! lookup, so a name that later resolves somewhere private (DNS rebinding) is refused too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

/// Why an endpoint is refused (a 400 at creation; a permanent failure at delivery).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("not a URL: {0}")]
    NotAUrl(String),
    #[error("only https endpoints are accepted (plain http only to an allowed loopback host)")]
    Scheme,
    #[error("credentials in the URL are not accepted; authenticate by the signature")]
    Credentials,
    #[error("{0} is a private, loopback or link-local address; allow the host in TRIAGE_WEBHOOK_ALLOWED_HOSTS")]
    Private(IpAddr),
}

/// Checks what can be known from the URL alone (scheme, credentials, an IP literal).
pub fn check_url(raw: &str, allowed_hosts: &[String]) -> Result<Url, Refused> {
    let url = Url::parse(raw).map_err(|e| Refused::NotAUrl(e.to_string()))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Refused::Credentials);
    }
    let host = url.host().ok_or(Refused::NotAUrl("no host".into()))?;
    let allowed = is_allowed(&host_name(&host), allowed_hosts);
    let literal = match host {
        Host::Ipv4(ip) => Some(IpAddr::V4(ip)),
        Host::Ipv6(ip) => Some(IpAddr::V6(ip)),
        Host::Domain(_) => None,
    };
    match url.scheme() {
        "https" => {}
        // Plain http only where nothing crosses a network: an allowed loopback host.
        "http" if allowed && (literal.is_some_and(|ip| ip.is_loopback()) || is_localhost(&url)) => {
        }
        _ => return Err(Refused::Scheme),
    }
    if let Some(ip) = literal {
        check_addresses(&host_name(&host), &[ip], allowed_hosts)?;
    }
    Ok(url)
}

/// Refuses when any address `host` resolved to is special and the host is not allowed.
pub fn check_addresses(
    host: &str,
    ips: &[IpAddr],
    allowed_hosts: &[String],
) -> Result<(), Refused> {
    if is_allowed(host, allowed_hosts) {
        return Ok(());
    }
    match ips.iter().find(|ip| !is_public(ip)) {
        Some(ip) => Err(Refused::Private(*ip)),
        None => Ok(()),
    }
}

fn is_allowed(host: &str, allowed_hosts: &[String]) -> bool {
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    allowed_hosts.iter().any(|allowed| allowed == &host)
}

fn host_name(host: &Host<&str>) -> String {
    match host {
        Host::Domain(name) => name.to_ascii_lowercase(),
        Host::Ipv4(ip) => ip.to_string(),
        Host::Ipv6(ip) => ip.to_string(),
    }
}

fn is_localhost(url: &Url) -> bool {
    url.host_str()
        .is_some_and(|h| h.eq_ignore_ascii_case("localhost"))
}

/// Whether an address is an ordinary public one.
pub fn is_public(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public_v4(&v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: &Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        // Carrier-grade NAT (100.64/10) and benchmarking (198.18/15), reserved (240/4).
        || (a == 100 && (64..128).contains(&b))
        || (a == 198 && (b == 18 || b == 19))
        || a >= 240)
}

fn is_public_v6(ip: &Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        // Unique local fc00::/7, link-local fe80::/10, documentation 2001:db8::/32.
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
        || (first == 0x2001 && ip.segments()[1] == 0x0db8))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(hosts: &[&str]) -> Vec<String> {
        hosts.iter().map(|h| h.to_string()).collect()
    }

    #[test]
    fn urls_by_table() {
        let none = allowed(&[]);
        let local = allowed(&["127.0.0.1", "localhost", "hooks.internal"]);
        let cases: &[(&str, &[String], bool)] = &[
            ("https://example.com/hook", &none, true),
            ("http://example.com/hook", &none, false),
            ("ftp://example.com/hook", &none, false),
            ("https://user:pw@example.com/hook", &none, false),
            ("https://10.0.0.7/hook", &none, false),
            ("https://192.168.1.1/hook", &none, false),
            ("https://169.254.169.254/latest/meta-data", &none, false),
            ("https://127.0.0.1/hook", &none, false),
            ("https://[::1]/hook", &none, false),
            ("https://[fe80::1]/hook", &none, false),
            ("https://[::ffff:10.0.0.1]/hook", &none, false),
            ("https://100.64.0.1/hook", &none, false),
            ("https://93.184.216.34/hook", &none, true),
            ("http://127.0.0.1:8080/hook", &none, false),
            ("http://127.0.0.1:8080/hook", &local, true),
            ("http://localhost:8080/hook", &local, true),
            ("https://127.0.0.1:8443/hook", &local, true),
            // Allowed but not loopback: still https only.
            ("http://hooks.internal/hook", &local, false),
            ("https://hooks.internal/hook", &local, true),
            ("not a url", &none, false),
        ];
        for (url, hosts, ok) in cases {
            assert_eq!(check_url(url, hosts).is_ok(), *ok, "{url} with {hosts:?}");
        }
    }

    #[test]
    fn a_name_resolving_to_a_private_address_is_refused_unless_allowed() {
        let private: IpAddr = "10.1.2.3".parse().unwrap();
        let public: IpAddr = "93.184.216.34".parse().unwrap();
        assert!(check_addresses("hooks.example", &[public], &[]).is_ok());
        assert_eq!(
            check_addresses("hooks.example", &[public, private], &[]),
            Err(Refused::Private(private))
        );
        assert!(check_addresses("hooks.example", &[private], &allowed(&["hooks.example"])).is_ok());
    }
}
