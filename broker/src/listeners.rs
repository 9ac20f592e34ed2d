//! Named listeners, as Kafka configures them: `listeners`,
//! `advertised.listeners`, `listener.security.protocol.map` and
//! `inter.broker.listener.name` (or `security.inter.broker.protocol`), with
//! per-listener settings under `listener.name.<name>.<key>`.
//!
//! A listener whose TLS material is missing, or a SASL listener without a
//! mechanism Skein serves (GSSAPI, Kafka's default, is not one), is a
//! start-up error: a listener is never served with less security than it
//! was configured with.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use skein_controller::broker_config as keys;
use skein_controller::ScramMechanism;

/// Kafka's security protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Self::Plaintext,
            "SSL" => Self::Ssl,
            "SASL_PLAINTEXT" => Self::SaslPlaintext,
            "SASL_SSL" => Self::SaslSsl,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::SaslSsl => "SASL_SSL",
        }
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    pub fn uses_sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }
}

/// A SASL mechanism Skein serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    Scram(ScramMechanism),
    OAuthBearer,
}

impl SaslMechanism {
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::Scram(m) => m.name(),
            Self::OAuthBearer => "OAUTHBEARER",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "PLAIN" => Some(Self::Plain),
            "OAUTHBEARER" => Some(Self::OAuthBearer),
            other => ScramMechanism::from_name(other).map(Self::Scram),
        }
    }
}

/// A SASL listener's settings.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslSettings {
    /// `sasl.enabled.mechanisms`, in the configured order.
    pub mechanisms: Vec<SaslMechanism>,
    /// PLAIN's users and passwords: the `user_<name>="<password>"` options
    /// of `listener.name.<listener>.plain.sasl.jaas.config`.
    pub plain_users: BTreeMap<String, String>,
    /// `connections.max.reauth.ms` (KIP-368): an authenticated session
    /// lasts this long, then the client must authenticate again on the
    /// same connection or it is closed. 0: sessions do not expire.
    pub max_reauth_ms: u64,
    /// OAUTHBEARER's token validation.
    pub oauth: Option<crate::sasl::oauthbearer::OAuthSettings>,
}

impl std::fmt::Debug for SaslSettings {
    /// Passwords are left out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslSettings")
            .field("mechanisms", &self.mechanisms)
            .field("plain_users", &self.plain_users.keys().collect::<Vec<_>>())
            .field("max_reauth_ms", &self.max_reauth_ms)
            .finish()
    }
}

/// `ssl.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

/// Where PEM material comes from: a file (re-read when it changes) or the
/// config value itself (Kafka's inline `ssl.keystore.key` and friends).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pem {
    File(PathBuf),
    Inline(String),
}

/// A TLS listener's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// The private key (PKCS#8, PKCS#1 or SEC1) and certificate chain: one
    /// file holding both, or `ssl.keystore.key` + `ssl.keystore.certificate.chain`.
    pub key: Pem,
    pub chain: Pem,
    /// CA certificates client certificates are checked against.
    pub truststore: Option<Pem>,
    pub client_auth: ClientAuth,
    /// `ssl.enabled.protocols`: TLSv1.2 and/or TLSv1.3.
    pub tls12: bool,
    pub tls13: bool,
    /// `ssl.principal.mapping.rules` (checked): how a client certificate's
    /// subject becomes a principal.
    pub principal_mapping_rules: String,
}

/// One listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerConfig {
    /// Upper case, as Kafka normalises listener names.
    pub name: String,
    pub protocol: SecurityProtocol,
    /// `host:port` to bind (an empty host binds every interface).
    pub bind: String,
    pub advertised_host: String,
    pub advertised_port: i32,
    pub tls: Option<TlsSettings>,
    pub sasl: Option<SaslSettings>,
}

/// Kafka's default `listener.security.protocol.map`: each protocol's name
/// is also a listener name.
const DEFAULT_MAP: &str =
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";

/// A listener setting that cannot be served as written.
#[derive(Debug, thiserror::Error)]
#[error("invalid value {value:?} for {key}: {reason}")]
pub struct InvalidListener {
    pub key: String,
    pub value: String,
    pub reason: String,
}

fn bad(key: &str, value: &str, reason: impl Into<String>) -> InvalidListener {
    InvalidListener {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// Splits `host:port` (IPv6 in brackets allowed).
pub fn split_host_port(s: &str) -> Option<(String, i32)> {
    let (h, p) = s.rsplit_once(':')?;
    let port = p.parse().ok()?;
    let host = h.trim_start_matches('[').trim_end_matches(']');
    let host = if host.is_empty() { "127.0.0.1" } else { host };
    Some((host.to_string(), port))
}

/// `NAME://host:port,...` in order.
fn parse_list(key: &str, value: &str) -> Result<Vec<(String, String)>, InvalidListener> {
    let mut out = Vec::new();
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, addr) = item
            .split_once("://")
            .ok_or_else(|| bad(key, value, format!("'{item}' is not NAME://HOST:PORT")))?;
        let name = name.trim().to_ascii_uppercase();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(bad(key, value, format!("'{name}' is not a listener name")));
        }
        if split_host_port(addr).is_none() {
            return Err(bad(key, value, format!("'{addr}' is not HOST:PORT")));
        }
        if out.iter().any(|(n, _)| *n == name) {
            return Err(bad(
                key,
                value,
                format!("listener name {name} appears twice"),
            ));
        }
        out.push((name, addr.trim().to_string()));
    }
    if out.is_empty() {
        return Err(bad(key, value, "no listener"));
    }
    Ok(out)
}

/// A setting of listener `name`: `listener.name.<name>.<key>` first, then
/// `<key>`.
pub fn listener_setting<'a>(
    raw: &'a BTreeMap<String, String>,
    name: &str,
    key: &str,
) -> Option<&'a str> {
    raw.get(&format!(
        "listener.name.{}.{key}",
        name.to_ascii_lowercase()
    ))
    .or_else(|| raw.get(key))
    .map(String::as_str)
    .filter(|v| !v.trim().is_empty())
}

/// The listeners a broker serves and the name of the one replication uses.
pub fn parse(
    raw: &BTreeMap<String, String>,
) -> Result<(Vec<ListenerConfig>, String), InvalidListener> {
    let listeners_value = raw
        .get(keys::LISTENERS.name)
        .map(String::as_str)
        .unwrap_or(keys::LISTENERS.when_unset());
    let listeners = parse_list(keys::LISTENERS.name, listeners_value)?;

    let map_value = raw
        .get(keys::LISTENER_SECURITY_PROTOCOL_MAP.name)
        .map(String::as_str)
        .unwrap_or(DEFAULT_MAP);
    let mut map = BTreeMap::new();
    for item in map_value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let (name, proto) = item.split_once(':').ok_or_else(|| {
            bad(
                keys::LISTENER_SECURITY_PROTOCOL_MAP.name,
                map_value,
                format!("'{item}' is not NAME:PROTOCOL"),
            )
        })?;
        let protocol = SecurityProtocol::parse(proto).ok_or_else(|| {
            bad(
                keys::LISTENER_SECURITY_PROTOCOL_MAP.name,
                map_value,
                format!("unknown security protocol '{proto}' (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)"),
            )
        })?;
        map.insert(name.trim().to_ascii_uppercase(), protocol);
    }

    let advertised = match raw
        .get(keys::ADVERTISED_LISTENERS.name)
        .filter(|v| !v.trim().is_empty())
    {
        Some(v) => parse_list(keys::ADVERTISED_LISTENERS.name, v)?,
        None => listeners.clone(),
    };
    let names: BTreeSet<&str> = listeners.iter().map(|(n, _)| n.as_str()).collect();
    for (n, _) in &advertised {
        if !names.contains(n.as_str()) {
            return Err(bad(
                keys::ADVERTISED_LISTENERS.name,
                raw.get(keys::ADVERTISED_LISTENERS.name)
                    .map(String::as_str)
                    .unwrap_or(""),
                format!("{n} is not one of the listeners ({})", listeners_value),
            ));
        }
    }

    let mut out = Vec::new();
    let mut ports = BTreeSet::new();
    for (name, bind) in &listeners {
        let protocol = *map.get(name).ok_or_else(|| {
            bad(
                keys::LISTENER_SECURITY_PROTOCOL_MAP.name,
                map_value,
                format!("listener {name} has no security protocol in the map"),
            )
        })?;
        let (_, port) = split_host_port(bind).expect("checked by parse_list");
        if port != 0 && !ports.insert(port) {
            return Err(bad(
                keys::LISTENERS.name,
                listeners_value,
                format!("port {port} is used twice"),
            ));
        }
        let adv = advertised
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, a)| a.as_str())
            .unwrap_or(bind);
        let (advertised_host, advertised_port) =
            split_host_port(adv).expect("checked by parse_list");
        if advertised_host == "0.0.0.0" || advertised_host == "::" {
            return Err(bad(
                keys::ADVERTISED_LISTENERS.name,
                adv,
                format!("listener {name} would advertise the non-routable address {advertised_host}; set advertised.listeners"),
            ));
        }
        let tls = if protocol.uses_tls() {
            Some(tls_settings(raw, name)?)
        } else {
            None
        };
        let sasl = if protocol.uses_sasl() {
            Some(sasl_settings(raw, name)?)
        } else {
            None
        };
        out.push(ListenerConfig {
            name: name.clone(),
            protocol,
            bind: bind.clone(),
            advertised_host,
            advertised_port,
            tls,
            sasl,
        });
    }

    let inter = match raw
        .get(keys::INTER_BROKER_LISTENER_NAME.name)
        .filter(|v| !v.trim().is_empty())
    {
        Some(n) => {
            let n = n.trim().to_ascii_uppercase();
            if !names.contains(n.as_str()) {
                return Err(bad(
                    keys::INTER_BROKER_LISTENER_NAME.name,
                    &n,
                    format!("not one of the listeners ({listeners_value})"),
                ));
            }
            n
        }
        None => {
            let proto = raw
                .get(keys::SECURITY_INTER_BROKER_PROTOCOL.name)
                .map(String::as_str)
                .unwrap_or(keys::SECURITY_INTER_BROKER_PROTOCOL.when_unset());
            let wanted = SecurityProtocol::parse(proto).ok_or_else(|| {
                bad(
                    keys::SECURITY_INTER_BROKER_PROTOCOL.name,
                    proto,
                    "unknown security protocol",
                )
            })?;
            // Kafka looks for the listener named after the protocol; with a
            // single listener there is no choice to make.
            match out.iter().find(|l| l.name == wanted.name()) {
                Some(l) => l.name.clone(),
                None if out.len() == 1 => out[0].name.clone(),
                None => {
                    return Err(bad(
                        keys::INTER_BROKER_LISTENER_NAME.name,
                        "",
                        format!(
                            "not set, and no listener is named {} (security.inter.broker.protocol); name the replication listener",
                            wanted.name()
                        ),
                    ))
                }
            }
        }
    };
    Ok((out, inter))
}

fn sasl_settings(
    raw: &BTreeMap<String, String>,
    name: &str,
) -> Result<SaslSettings, InvalidListener> {
    let lower = name.to_ascii_lowercase();
    let key = match raw.contains_key(&format!("listener.name.{lower}.sasl.enabled.mechanisms")) {
        true => format!("listener.name.{lower}.sasl.enabled.mechanisms"),
        false => keys::SASL_ENABLED_MECHANISMS.name.to_string(),
    };
    // Kafka's default is GSSAPI, which Skein does not serve: saying so
    // beats a listener that accepts nobody.
    let value = listener_setting(raw, name, keys::SASL_ENABLED_MECHANISMS.name)
        .unwrap_or(keys::SASL_ENABLED_MECHANISMS.when_unset());
    let mut mechanisms = Vec::new();
    for m in value.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        let mechanism = match (m, SaslMechanism::parse(m)) {
            (_, Some(mechanism)) => mechanism,
            ("GSSAPI", None) => return Err(bad(&key, value, format!(
                "listener {name}: GSSAPI (Kerberos, Kafka's default) is not supported; enable PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and/or OAUTHBEARER"
            ))),
            (other, None) => return Err(bad(&key, value, format!(
                "listener {name}: unknown SASL mechanism '{other}' (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)"
            ))),
        };
        if !mechanisms.contains(&mechanism) {
            mechanisms.push(mechanism);
        }
    }
    if mechanisms.is_empty() {
        return Err(bad(
            &key,
            value,
            format!("listener {name}: no SASL mechanism"),
        ));
    }
    let mut plain_users = BTreeMap::new();
    if mechanisms.contains(&SaslMechanism::Plain) {
        let jaas_key = format!("listener.name.{lower}.plain.sasl.jaas.config");
        let Some(text) = raw.get(&jaas_key).filter(|v| !v.trim().is_empty()) else {
            return Err(bad(&jaas_key, "", format!(
                "listener {name} enables PLAIN but has no users: set {jaas_key} to a PlainLoginModule entry with user_<name>=\"<password>\" options"
            )));
        };
        let entry = crate::jaas::parse(text).map_err(|e| bad(&jaas_key, "(hidden)", e))?;
        plain_users = entry
            .options
            .into_iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("user_")?.to_string(), v)))
            .filter(|(user, _)| !user.is_empty())
            .collect();
        if plain_users.is_empty() {
            return Err(bad(&jaas_key, "(hidden)", format!(
                "listener {name}: no user_<name>=\"<password>\" option, so no PLAIN user could log in"
            )));
        }
    }
    let max_reauth_ms = match listener_setting(raw, name, keys::CONNECTIONS_MAX_REAUTH_MS.name) {
        None => 0,
        Some(v) => v.trim().parse::<u64>().map_err(|_| {
            bad(
                keys::CONNECTIONS_MAX_REAUTH_MS.name,
                v,
                "not a number of milliseconds",
            )
        })?,
    };
    let oauth = match mechanisms.contains(&SaslMechanism::OAuthBearer) {
        true => Some(
            crate::sasl::oauthbearer::from_config(raw, name)
                .map_err(|(k, v, why)| bad(&k, &v, why))?,
        ),
        false => None,
    };
    Ok(SaslSettings {
        mechanisms,
        plain_users,
        max_reauth_ms,
        oauth,
    })
}

fn tls_settings(
    raw: &BTreeMap<String, String>,
    name: &str,
) -> Result<TlsSettings, InvalidListener> {
    let get = |k: &str| listener_setting(raw, name, k);
    let key_name = |k: &str| format!("listener.name.{}.{k} (or {k})", name.to_ascii_lowercase());
    for (k, what) in [
        (keys::SSL_KEYSTORE_TYPE.name, "keystore"),
        (keys::SSL_TRUSTSTORE_TYPE.name, "truststore"),
    ] {
        if let Some(t) = get(k) {
            if !t.eq_ignore_ascii_case("PEM") {
                return Err(bad(
                    &key_name(k),
                    t,
                    format!("only PEM {what}s are supported; convert a JKS or PKCS12 {what} to PEM (keytool -importkeystore, openssl pkcs12)"),
                ));
            }
        }
    }
    if get(keys::SSL_KEY_PASSWORD.name).is_some() {
        return Err(bad(
            &key_name(keys::SSL_KEY_PASSWORD.name),
            "(hidden)",
            "encrypted private keys are not supported yet; give the key unencrypted (PKCS#8) and protect the file",
        ));
    }
    let (key, chain) = match (
        get(keys::SSL_KEYSTORE_LOCATION.name),
        get("ssl.keystore.key"),
        get("ssl.keystore.certificate.chain"),
    ) {
        (Some(path), None, None) => {
            let p = PathBuf::from(path.trim());
            (Pem::File(p.clone()), Pem::File(p))
        }
        (None, Some(k), Some(c)) => (Pem::Inline(k.to_string()), Pem::Inline(c.to_string())),
        (None, None, None) => {
            return Err(bad(
                &key_name(keys::SSL_KEYSTORE_LOCATION.name),
                "",
                format!(
                    "listener {name} is SSL but has no certificate: set ssl.keystore.location (a PEM file with the private key and the certificate chain) or ssl.keystore.key and ssl.keystore.certificate.chain"
                ),
            ))
        }
        _ => {
            return Err(bad(
                &key_name(keys::SSL_KEYSTORE_LOCATION.name),
                "",
                "set either ssl.keystore.location or both ssl.keystore.key and ssl.keystore.certificate.chain",
            ))
        }
    };
    let truststore = match (
        get(keys::SSL_TRUSTSTORE_LOCATION.name),
        get("ssl.truststore.certificates"),
    ) {
        (Some(p), None) => Some(Pem::File(PathBuf::from(p.trim()))),
        (None, Some(c)) => Some(Pem::Inline(c.to_string())),
        (None, None) => None,
        _ => {
            return Err(bad(
                &key_name(keys::SSL_TRUSTSTORE_LOCATION.name),
                "",
                "set either ssl.truststore.location or ssl.truststore.certificates, not both",
            ))
        }
    };
    let client_auth = match get(keys::SSL_CLIENT_AUTH.name).map(|s| s.trim().to_ascii_lowercase()) {
        None => ClientAuth::None,
        Some(v) => match v.as_str() {
            "none" => ClientAuth::None,
            "requested" => ClientAuth::Requested,
            "required" => ClientAuth::Required,
            _ => {
                return Err(bad(
                    &key_name(keys::SSL_CLIENT_AUTH.name),
                    &v,
                    "expected none, requested or required",
                ))
            }
        },
    };
    if client_auth != ClientAuth::None && truststore.is_none() {
        return Err(bad(
            &key_name(keys::SSL_CLIENT_AUTH.name),
            get(keys::SSL_CLIENT_AUTH.name).unwrap_or(""),
            "client certificates need a truststore (ssl.truststore.location or ssl.truststore.certificates)",
        ));
    }
    let protocols =
        get(keys::SSL_ENABLED_PROTOCOLS.name).unwrap_or(keys::SSL_ENABLED_PROTOCOLS.when_unset());
    let (mut tls12, mut tls13) = (false, false);
    for p in protocols
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        match p {
            "TLSv1.2" => tls12 = true,
            "TLSv1.3" => tls13 = true,
            other => {
                return Err(bad(
                    &key_name(keys::SSL_ENABLED_PROTOCOLS.name),
                    protocols,
                    format!("{other} is not supported (TLSv1.2, TLSv1.3)"),
                ))
            }
        }
    }
    if !tls12 && !tls13 {
        return Err(bad(
            &key_name(keys::SSL_ENABLED_PROTOCOLS.name),
            protocols,
            "no protocol enabled",
        ));
    }
    let principal_mapping_rules = get(keys::SSL_PRINCIPAL_MAPPING_RULES.name)
        .unwrap_or(keys::SSL_PRINCIPAL_MAPPING_RULES.when_unset())
        .to_string();
    if let Err(e) = crate::ssl_principal::PrincipalMapper::parse(&principal_mapping_rules) {
        return Err(bad(
            &key_name(keys::SSL_PRINCIPAL_MAPPING_RULES.name),
            &principal_mapping_rules,
            e,
        ));
    }
    Ok(TlsSettings {
        key,
        chain,
        truststore,
        client_auth,
        tls12,
        tls13,
        principal_mapping_rules,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn err(pairs: &[(&str, &str)]) -> String {
        parse(&raw(pairs)).unwrap_err().to_string()
    }

    #[test]
    fn one_plaintext_listener_by_default() {
        let (l, inter) = parse(&raw(&[])).unwrap();
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].name, "PLAINTEXT");
        assert_eq!(l[0].protocol, SecurityProtocol::Plaintext);
        assert_eq!(l[0].bind, "127.0.0.1:9092");
        assert_eq!(inter, "PLAINTEXT");
    }

    #[test]
    fn named_listeners_with_a_map_and_advertised_addresses() {
        let (l, inter) = parse(&raw(&[
            ("listeners", "INTERNAL://0.0.0.0:9092,EXTERNAL://:9094"),
            (
                "advertised.listeners",
                "INTERNAL://broker-0.svc:9092,EXTERNAL://kafka.example.com:30094",
            ),
            (
                "listener.security.protocol.map",
                "INTERNAL:PLAINTEXT,EXTERNAL:SSL",
            ),
            ("inter.broker.listener.name", "internal"),
            (
                "listener.name.external.ssl.keystore.location",
                "/certs/server.pem",
            ),
            ("listener.name.external.ssl.client.auth", "required"),
            ("ssl.truststore.location", "/certs/ca.pem"),
        ]))
        .unwrap();
        assert_eq!(inter, "INTERNAL");
        assert_eq!(l[0].advertised_host, "broker-0.svc");
        assert!(l[0].tls.is_none());
        assert_eq!(l[1].protocol, SecurityProtocol::Ssl);
        assert_eq!(
            (l[1].advertised_host.as_str(), l[1].advertised_port),
            ("kafka.example.com", 30094)
        );
        let tls = l[1].tls.as_ref().unwrap();
        assert_eq!(tls.key, Pem::File("/certs/server.pem".into()));
        assert_eq!(tls.truststore, Some(Pem::File("/certs/ca.pem".into())));
        assert_eq!(tls.client_auth, ClientAuth::Required);
        assert!(tls.tls12 && tls.tls13);
    }

    #[test]
    fn an_ssl_listener_without_a_certificate_is_an_error_not_plaintext() {
        let e = err(&[("listeners", "SSL://127.0.0.1:9093")]);
        assert!(e.contains("has no certificate"), "{e}");
    }

    #[test]
    fn sasl_listeners_need_a_served_mechanism_and_plain_users() {
        let e = err(&[("listeners", "SASL_PLAINTEXT://127.0.0.1:9093")]);
        assert!(
            e.contains("GSSAPI (Kerberos, Kafka's default) is not supported"),
            "{e}"
        );
        let e = err(&[
            ("listeners", "SASL_PLAINTEXT://127.0.0.1:9093"),
            ("sasl.enabled.mechanisms", "SCRAM-SHA-1"),
        ]);
        assert!(e.contains("unknown SASL mechanism 'SCRAM-SHA-1'"), "{e}");
        let e = err(&[
            ("listeners", "SASL_PLAINTEXT://127.0.0.1:9093"),
            ("sasl.enabled.mechanisms", "PLAIN"),
        ]);
        assert!(e.contains("enables PLAIN but has no users"), "{e}");
        let e = err(&[
            ("listeners", "SASL_PLAINTEXT://127.0.0.1:9093"),
            ("sasl.enabled.mechanisms", "PLAIN"),
            (
                "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\" password=\"b\";",
            ),
        ]);
        assert!(e.contains("no user_<name>"), "{e}");
        assert!(!e.contains("\"b\""), "the password is not echoed: {e}");
        // An SSL listener needs its TLS material as well.
        let e = err(&[
            ("listeners", "SASL_SSL://127.0.0.1:9093"),
            ("sasl.enabled.mechanisms", "SCRAM-SHA-256"),
        ]);
        assert!(e.contains("has no certificate"), "{e}");

        let (l, _) = parse(&raw(&[
            ("listeners", "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093"),
            (
                "listener.name.sasl_plaintext.sasl.enabled.mechanisms",
                "SCRAM-SHA-512, PLAIN,SCRAM-SHA-256",
            ),
            (
                "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-secret\";",
            ),
            ("connections.max.reauth.ms", "60000"),
            ("inter.broker.listener.name", "PLAINTEXT"),
        ]))
        .unwrap();
        assert!(l[0].sasl.is_none());
        let sasl = l[1].sasl.as_ref().unwrap();
        assert_eq!(
            sasl.mechanisms,
            vec![
                SaslMechanism::Scram(ScramMechanism::Sha512),
                SaslMechanism::Plain,
                SaslMechanism::Scram(ScramMechanism::Sha256)
            ]
        );
        assert_eq!(sasl.plain_users["alice"], "alice-secret");
        assert_eq!(sasl.max_reauth_ms, 60000);
        assert!(!format!("{sasl:?}").contains("alice-secret"));
    }

    #[test]
    fn unknown_protocols_are_refused() {
        let e = err(&[
            ("listeners", "A://127.0.0.1:9093"),
            ("listener.security.protocol.map", "A:TLS"),
        ]);
        assert!(e.contains("unknown security protocol 'TLS'"), "{e}");
        let e = err(&[("listeners", "CLIENT://127.0.0.1:9093")]);
        assert!(e.contains("no security protocol"), "{e}");
    }

    #[test]
    fn mistakes_in_the_lists_are_named() {
        assert!(err(&[("listeners", "PLAINTEXT://a:1,PLAINTEXT://b:2")]).contains("appears twice"));
        assert!(err(&[
            (
                "listeners",
                "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9092"
            ),
            ("ssl.keystore.location", "/x")
        ])
        .contains("used twice"));
        assert!(err(&[("listeners", "PLAINTEXT://0.0.0.0:9092")]).contains("non-routable"));
        assert!(err(&[
            ("listeners", "PLAINTEXT://127.0.0.1:9092"),
            ("advertised.listeners", "SSL://x:1")
        ])
        .contains("not one of the listeners"));
        assert!(err(&[
            ("listeners", "PLAINTEXT://127.0.0.1:9092"),
            ("inter.broker.listener.name", "REPLICATION")
        ])
        .contains("not one of the listeners"));
        assert!(err(&[
            ("listeners", "A://127.0.0.1:1,B://127.0.0.1:2"),
            ("listener.security.protocol.map", "A:PLAINTEXT,B:PLAINTEXT"),
        ])
        .contains("name the replication listener"));
    }

    #[test]
    fn tls_settings_are_checked() {
        let base = [("listeners", "SSL://127.0.0.1:9093")];
        let with = |extra: &[(&str, &str)]| {
            let mut v: Vec<(&str, &str)> = base.to_vec();
            v.extend_from_slice(extra);
            err(&v)
        };
        assert!(with(&[
            ("ssl.keystore.location", "/k"),
            ("ssl.keystore.type", "JKS")
        ])
        .contains("only PEM"));
        assert!(with(&[
            ("ssl.keystore.location", "/k"),
            ("ssl.client.auth", "required")
        ])
        .contains("need a truststore"));
        assert!(with(&[
            ("ssl.keystore.location", "/k"),
            ("ssl.enabled.protocols", "TLSv1.1")
        ])
        .contains("TLSv1.1 is not supported"));
        assert!(with(&[
            ("ssl.keystore.location", "/k"),
            ("ssl.key.password", "secret")
        ])
        .contains("encrypted private keys"));
        assert!(with(&[("ssl.keystore.key", "k")]).contains("either ssl.keystore.location"));
        let (l, _) = parse(&raw(&[
            ("listeners", "SSL://127.0.0.1:9093"),
            ("ssl.keystore.key", "KEY"),
            ("ssl.keystore.certificate.chain", "CHAIN"),
            ("ssl.enabled.protocols", "TLSv1.3"),
        ]))
        .unwrap();
        let tls = l[0].tls.as_ref().unwrap();
        assert_eq!(tls.key, Pem::Inline("KEY".into()));
        assert!(!tls.tls12 && tls.tls13);
    }
}
