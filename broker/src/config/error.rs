//! What a broker configuration can get wrong, as start-up reports it; a
//! secret's value is never shown.

use std::path::PathBuf;

/// A configuration problem found at start-up.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {0}: {1}")]
    File(PathBuf, std::io::Error),
    #[error("bad line {line} in {file}: expected key=value")]
    Syntax { file: PathBuf, line: usize },
    #[error("bad --override {0:?}: expected key=value")]
    Override(String),
    /// The value is not shown when the key holds a secret (a JAAS text
    /// with passwords, a key): start-up errors end up in logs.
    #[error("invalid value {} for {key}: {reason}", shown_value(key, value))]
    Value {
        key: String,
        value: String,
        reason: String,
    },
}

/// A setting's value as an error shows it: quoted, or `(hidden)` for a secret.
fn shown_value(key: &str, value: &str) -> String {
    if is_sensitive(key) {
        "(hidden)".to_string()
    } else {
        format!("{value:?}")
    }
}

impl From<crate::connection_quotas::InvalidLimit> for ConfigError {
    fn from(e: crate::connection_quotas::InvalidLimit) -> Self {
        ConfigError::Value {
            key: e.key,
            value: e.value,
            reason: e.reason,
        }
    }
}

impl From<crate::authorizer_config::InvalidAuthorizerConfig> for ConfigError {
    fn from(e: crate::authorizer_config::InvalidAuthorizerConfig) -> Self {
        ConfigError::Value {
            key: e.key,
            value: e.value,
            reason: e.reason,
        }
    }
}

impl From<crate::listeners::InvalidListener> for ConfigError {
    fn from(e: crate::listeners::InvalidListener) -> Self {
        ConfigError::Value {
            key: e.key,
            value: e.value,
            reason: e.reason,
        }
    }
}

/// Whether a broker setting holds a secret, whose value DescribeConfigs must
/// never return (Kafka's PASSWORD-typed configs: key, keystore and truststore
/// passwords, PEM keys and certificate chains given inline, JAAS
/// configurations with their credentials, client secrets), also under a
/// `listener.name.<listener>.[<mechanism>.]` prefix.
pub fn is_sensitive(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["password", "secret", "jaas.config"]
        .iter()
        .any(|w| k.contains(w))
        || [
            "keystore.key",
            "keystore.certificate.chain",
            "truststore.certificates",
        ]
        .iter()
        .any(|s| k.ends_with(s))
}
