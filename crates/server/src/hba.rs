//! Host rules, as pg_hba.conf: an ordered `[[auth.rules]]` list, each
//! naming client addresses, users, databases and whether TLS is in use;
//! the first rule that matches a connection decides how it authenticates
//! (`scram-sha-256`, `trust`) or that it is refused (`reject`). A
//! connection no rule matches is refused with PostgreSQL's 28000. Without
//! rules the server keeps one rule "all addresses, all users, all
//! databases, `[auth] method`".
//!
//! Checked once, when the configuration is loaded (start or reload): a bad
//! address or method is an error naming the rule, and `trust` for a
//! network address needs `allow_trust_from_network = true`.

use std::net::{IpAddr, SocketAddr};

use crate::ServerError;
use crate::config::{AuthConfig, AuthMethod, NameList, RuleConfig};

/// Rules a configuration may hold (pg_hba.conf files of real sites have
/// tens; a bound keeps a mistaken generated file from slowing every login).
const RULES_MAX: usize = 1000;

/// How a connection that matched a rule goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    ScramSha256,
    Trust,
    Reject,
}

/// Which connections a rule applies to by TLS (pg_hba.conf's `host`,
/// `hostssl`, `hostnossl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TlsMatch {
    /// Both (`host`).
    Optional,
    /// Only TLS connections (`hostssl`).
    Required,
    /// Only plain ones (`hostnossl`).
    Off,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Names {
    All,
    Listed(Vec<String>),
}

impl Names {
    fn matches(&self, name: &str) -> bool {
        match self {
            Names::All => true,
            Names::Listed(names) => names.iter().any(|n| n == name),
        }
    }
}

/// An address and prefix length (`10.0.0.0/8`); None: "all".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Net {
    addr: IpAddr,
    prefix: u8,
}

impl Net {
    /// `a.b.c.d/n`, `x::y/n`, or a bare address (one host).
    fn parse(text: &str) -> Option<Net> {
        let (addr, prefix) = match text.split_once('/') {
            Some((a, p)) => (a.parse::<IpAddr>().ok()?, Some(p.parse::<u8>().ok()?)),
            None => (text.parse::<IpAddr>().ok()?, None),
        };
        let bits = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.unwrap_or(bits);
        (prefix <= bits).then_some(Net { addr, prefix })
    }

    fn contains(&self, ip: IpAddr) -> bool {
        // As pg_hba.conf: an IPv4 rule never matches an IPv6 client (the
        // caller has turned IPv4-mapped IPv6 addresses into IPv4 ones).
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix)).unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }

    /// Every address of the network is a loopback one.
    fn is_loopback(&self) -> bool {
        match self.addr {
            IpAddr::V4(a) => self.prefix >= 8 && a.is_loopback(),
            IpAddr::V6(a) => self.prefix == 128 && a.is_loopback(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Rule {
    net: Option<Net>,
    users: Names,
    databases: Names,
    tls: TlsMatch,
    pub method: Method,
    /// The connection must have presented a certificate that chains to
    /// `[tls] client_ca` (pg_hba.conf's `clientcert=verify-ca`).
    pub client_cert: bool,
}

/// What a connection presents to the rules.
pub struct Client<'a> {
    /// Already canonical: IPv4-mapped IPv6 addresses as IPv4.
    pub addr: IpAddr,
    pub user: &'a str,
    pub database: &'a str,
    pub tls: bool,
}

impl Client<'_> {
    /// PostgreSQL's message when no rule matches (28000).
    pub fn no_entry_message(&self) -> String {
        format!(
            "no pg_hba.conf entry for host \"{}\", user \"{}\", database \"{}\", {}",
            self.addr,
            self.user,
            self.database,
            self.encryption()
        )
    }

    /// PostgreSQL's message for a `reject` rule (28000).
    pub fn rejected_message(&self) -> String {
        format!(
            "pg_hba.conf rejects connection for host \"{}\", user \"{}\", database \"{}\", {}",
            self.addr,
            self.user,
            self.database,
            self.encryption()
        )
    }

    fn encryption(&self) -> &'static str {
        if self.tls { "SSL encryption" } else { "no encryption" }
    }
}

/// The rules in force, in order.
#[derive(Clone, Debug)]
pub struct Rules(Vec<Rule>);

impl Rules {
    /// The configured rules, or the one implied by `[auth] method`.
    /// `listen`: a trust rule is allowed for any address when the server
    /// only listens on loopback (no other client can reach it).
    pub fn from_config(auth: &AuthConfig, listen: SocketAddr, has_client_ca: bool) -> Result<Rules, ServerError> {
        if auth.rules.is_empty() {
            let method = match auth.method {
                AuthMethod::ScramSha256 => Method::ScramSha256,
                AuthMethod::Trust => Method::Trust,
            };
            let rule = Rule {
                net: None,
                users: Names::All,
                databases: Names::All,
                tls: TlsMatch::Optional,
                method,
                client_cert: false,
            };
            return Ok(Rules(vec![rule]));
        }
        if auth.rules.len() > RULES_MAX {
            return Err(ServerError::Config(format!("auth.rules: at most {RULES_MAX} rules")));
        }
        let rules = auth
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| {
                parse_rule(r, listen, has_client_ca).map_err(|m| ServerError::Config(format!("auth.rules[{i}] {m}")))
            })
            .collect::<Result<Vec<Rule>, ServerError>>()?;
        Ok(Rules(rules))
    }

    /// The first rule that matches; None: no rule does (28000).
    pub fn decide(&self, client: &Client<'_>) -> Option<&Rule> {
        self.0.iter().find(|r| {
            let tls = match r.tls {
                TlsMatch::Optional => true,
                TlsMatch::Required => client.tls,
                TlsMatch::Off => !client.tls,
            };
            tls && r.net.is_none_or(|n| n.contains(client.addr))
                && r.users.matches(client.user)
                && r.databases.matches(client.database)
        })
    }

    /// Some rule lets a user in with a password.
    pub fn any_scram(&self) -> bool {
        self.0.iter().any(|r| r.method == Method::ScramSha256)
    }
}

fn names(list: &NameList, key: &str) -> Result<Names, String> {
    let items: Vec<&String> = match list {
        NameList::One(s) => vec![s],
        NameList::Many(v) => v.iter().collect(),
    };
    if items.is_empty() {
        return Err(format!("{key}: an empty list matches nothing; use \"all\""));
    }
    if items.iter().any(|s| s.is_empty()) {
        return Err(format!("{key}: an empty name"));
    }
    if items.iter().any(|s| *s == "all") {
        if items.len() > 1 {
            return Err(format!("{key}: \"all\" cannot be listed with names"));
        }
        return Ok(Names::All);
    }
    Ok(Names::Listed(items.into_iter().cloned().collect()))
}

fn parse_rule(r: &RuleConfig, listen: SocketAddr, has_client_ca: bool) -> Result<Rule, String> {
    let net = match r.address.as_str() {
        "all" => None,
        text => Some(Net::parse(text).ok_or_else(|| {
            format!(
                "address {text:?} is not \"all\", an IP address or a CIDR network like \"10.0.0.0/8\" or \"::1/128\""
            )
        })?),
    };
    let method = match r.method.as_str() {
        "scram-sha-256" => Method::ScramSha256,
        "trust" => Method::Trust,
        "reject" => Method::Reject,
        other => return Err(format!("method must be \"scram-sha-256\", \"trust\" or \"reject\", not {other:?}")),
    };
    let tls = match r.tls.as_deref() {
        None | Some("optional") => TlsMatch::Optional,
        Some("required") => TlsMatch::Required,
        Some("off") => TlsMatch::Off,
        Some(other) => return Err(format!("tls must be \"optional\", \"required\" or \"off\", not {other:?}")),
    };
    let loopback_only = listen.ip().is_loopback() || net.is_some_and(|n| n.is_loopback());
    if method == Method::Trust && !loopback_only && !r.allow_trust_from_network {
        return Err(format!(
            "method \"trust\" lets anyone from {} in without a password; restrict address to a loopback one, or set allow_trust_from_network = true",
            r.address
        ));
    }
    if r.client_cert {
        if tls != TlsMatch::Required {
            return Err("client_cert = true needs tls = \"required\"".to_owned());
        }
        if !has_client_ca {
            return Err("client_cert = true needs [tls] client_ca".to_owned());
        }
    }
    Ok(Rule {
        net,
        users: names(&r.user, "user")?,
        databases: names(&r.database, "database")?,
        tls,
        method,
        client_cert: r.client_cert,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(toml: &str, listen: &str) -> Result<Rules, ServerError> {
        let config = crate::ServerConfig::from_toml_str(&format!("data_dir = \"d\"\n{toml}")).unwrap();
        Rules::from_config(&config.auth, listen.parse().unwrap(), false)
    }

    fn client<'a>(addr: &str, user: &'a str, database: &'a str, tls: bool) -> Client<'a> {
        Client { addr: addr.parse().unwrap(), user, database, tls }
    }

    #[test]
    fn networks_match_by_prefix() {
        let n = Net::parse("10.1.0.0/16").unwrap();
        assert!(n.contains("10.1.200.3".parse().unwrap()) && !n.contains("10.2.0.1".parse().unwrap()));
        assert!(!n.contains("::ffff:10.1.0.1".parse().unwrap()), "no IPv4 rule matches an IPv6 address");
        assert!(Net::parse("0.0.0.0/0").unwrap().contains("192.0.2.1".parse().unwrap()));
        assert!(Net::parse("::1").unwrap().contains("::1".parse().unwrap()));
        assert!(Net::parse("fd00::/8").unwrap().contains("fdab::1".parse().unwrap()));
        for bad in ["10.0.0.0/33", "::/129", "10.0.0", "host", "10.0.0.0/x", ""] {
            assert!(Net::parse(bad).is_none(), "{bad}");
        }
        assert!(Net::parse("127.0.0.0/8").unwrap().is_loopback() && !Net::parse("0.0.0.0/0").unwrap().is_loopback());
    }

    #[test]
    fn first_match_wins() {
        let r = rules(
            "[auth]\n\
             [[auth.rules]]\naddress = \"127.0.0.2\"\nuser = \"all\"\nmethod = \"reject\"\n\
             [[auth.rules]]\naddress = \"127.0.0.0/8\"\nuser = [\"bob\", \"carol\"]\ndatabase = \"app\"\nmethod = \"trust\"\n\
             [[auth.rules]]\naddress = \"all\"\nmethod = \"scram-sha-256\"\ntls = \"required\"\n",
            "0.0.0.0:5433",
        )
        .unwrap();
        let method = |c: Client<'_>| r.decide(&c).map(|rule| rule.method);
        assert_eq!(method(client("127.0.0.2", "bob", "app", false)), Some(Method::Reject));
        assert_eq!(method(client("127.0.0.1", "bob", "app", false)), Some(Method::Trust));
        assert_eq!(method(client("127.0.0.1", "bob", "other", false)), None);
        assert_eq!(method(client("127.0.0.1", "bob", "other", true)), Some(Method::ScramSha256));
        assert_eq!(method(client("10.0.0.1", "dave", "app", false)), None);
    }

    #[test]
    fn bad_rules_name_their_index_and_key() {
        for (rule, needle) in [
            ("address = \"10.0.0.0/40\"\nmethod = \"trust\"", "auth.rules[0] address"),
            ("address = \"all\"\nmethod = \"md5\"", "auth.rules[0] method"),
            ("address = \"all\"\nmethod = \"reject\"\ntls = \"yes\"", "auth.rules[0] tls"),
            ("address = \"all\"\nmethod = \"reject\"\nuser = []", "auth.rules[0] user"),
            ("address = \"all\"\nmethod = \"reject\"\ndatabase = [\"all\", \"x\"]", "auth.rules[0] database"),
            ("address = \"0.0.0.0/0\"\nmethod = \"trust\"", "allow_trust_from_network"),
            ("address = \"all\"\nmethod = \"scram-sha-256\"\nclient_cert = true", "client_cert"),
        ] {
            let e = rules(&format!("[auth]\n[[auth.rules]]\n{rule}\n"), "0.0.0.0:5433").unwrap_err().to_string();
            assert!(e.contains(needle), "{rule}: {e}");
        }
        // Trust from the network, said explicitly; and any trust rule on a loopback listener.
        rules(
            "[auth]\n[[auth.rules]]\naddress = \"10.0.0.0/8\"\nmethod = \"trust\"\nallow_trust_from_network = true\n",
            "0.0.0.0:5433",
        )
        .unwrap();
        rules("[auth]\n[[auth.rules]]\naddress = \"all\"\nmethod = \"trust\"\n", "127.0.0.1:5433").unwrap();
        rules("[auth]\n[[auth.rules]]\naddress = \"::1/128\"\nmethod = \"trust\"\n", "[::]:5433").unwrap();
    }

    #[test]
    fn messages_are_postgresqls() {
        let c = client("127.0.0.1", "u", "d", false);
        assert_eq!(
            c.no_entry_message(),
            "no pg_hba.conf entry for host \"127.0.0.1\", user \"u\", database \"d\", no encryption"
        );
        let c = client("::1", "u", "d", true);
        assert_eq!(
            c.rejected_message(),
            "pg_hba.conf rejects connection for host \"::1\", user \"u\", database \"d\", SSL encryption"
        );
    }
}
