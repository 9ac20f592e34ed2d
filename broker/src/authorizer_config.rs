//! The authorizer's settings, Kafka's keys: `authorizer.class.name` (on
//! when it names the StandardAuthorizer), `super.users` and
//! `allow.everyone.if.no.acl.found`.

use std::collections::{BTreeMap, HashSet};

use crate::principal::Principal;
use skein_controller::broker_config as keys;

/// A bad authorizer setting (the broker refuses to start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidAuthorizerConfig {
    pub key: String,
    pub value: String,
    pub reason: String,
}

/// Kafka's KRaft authorizer; Skein's authorizer answers to this name.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";
/// The names `authorizer.class.name` accepts: Kafka's KRaft and ZooKeeper
/// authorizers (same semantics) and Skein's own.
const ACCEPTED_NAMES: &[&str] = &[
    STANDARD_AUTHORIZER,
    "kafka.security.authorizer.AclAuthorizer",
    "skein.StandardAuthorizer",
];

/// `authorizer.class.name`, `super.users`, `allow.everyone.if.no.acl.found`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizerConfig {
    pub enabled: bool,
    /// Principals as written (`User:admin`).
    pub super_users: HashSet<String>,
    pub allow_everyone_if_no_acl_found: bool,
}

impl AuthorizerConfig {
    pub fn from_raw(raw: &BTreeMap<String, String>) -> Result<Self, InvalidAuthorizerConfig> {
        let bad = |key: &str, value: &str, reason: String| InvalidAuthorizerConfig {
            key: key.into(),
            value: value.into(),
            reason,
        };
        let name = raw
            .get(keys::AUTHORIZER_CLASS_NAME.name)
            .map(|s| s.trim())
            .unwrap_or(keys::AUTHORIZER_CLASS_NAME.when_unset());
        if !name.is_empty() && !ACCEPTED_NAMES.contains(&name) {
            return Err(bad(
                keys::AUTHORIZER_CLASS_NAME.name,
                name,
                format!(
                    "unknown authorizer; Skein's ACL authorizer answers to {}",
                    ACCEPTED_NAMES.join(", ")
                ),
            ));
        }
        let mut super_users = HashSet::new();
        if let Some(list) = raw.get(keys::SUPER_USERS.name) {
            for p in list.split(';').map(str::trim).filter(|p| !p.is_empty()) {
                let parsed = Principal::parse(p).ok_or_else(|| {
                    bad(
                        keys::SUPER_USERS.name,
                        list,
                        format!("`{p}` is not a principal (Type:name)"),
                    )
                })?;
                super_users.insert(parsed.to_string());
            }
        }
        let allow = match raw
            .get(keys::ALLOW_EVERYONE_IF_NO_ACL_FOUND.name)
            .map(|s| s.trim().to_ascii_lowercase())
        {
            None => false,
            Some(v) if v == "true" => true,
            Some(v) if v == "false" => false,
            Some(v) => {
                return Err(bad(
                    keys::ALLOW_EVERYONE_IF_NO_ACL_FOUND.name,
                    &v,
                    "expected true or false".into(),
                ))
            }
        };
        Ok(AuthorizerConfig {
            enabled: !name.is_empty(),
            super_users,
            allow_everyone_if_no_acl_found: allow,
        })
    }
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

    #[test]
    fn config_is_kafkas() {
        let off = AuthorizerConfig::from_raw(&raw(&[])).unwrap();
        assert!(!off.enabled && !off.allow_everyone_if_no_acl_found);
        let on = AuthorizerConfig::from_raw(&raw(&[
            ("authorizer.class.name", STANDARD_AUTHORIZER),
            ("super.users", "User:admin; User:CN=broker-0,O=skein"),
            ("allow.everyone.if.no.acl.found", "true"),
        ]))
        .unwrap();
        assert!(on.enabled && on.allow_everyone_if_no_acl_found);
        assert!(on.super_users.contains("User:admin"));
        assert!(on.super_users.contains("User:CN=broker-0,O=skein"));
        for bad in [
            ("authorizer.class.name", "com.example.MyAuthorizer"),
            ("super.users", "admin"),
            ("allow.everyone.if.no.acl.found", "yes"),
        ] {
            assert!(AuthorizerConfig::from_raw(&raw(&[bad])).is_err(), "{bad:?}");
        }
    }
}
