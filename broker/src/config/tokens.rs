//! The delegation token settings (`delegation.token.*`), by their Kafka
//! names.

use std::collections::BTreeMap;
use std::sync::Arc;

use skein_controller::broker_config as keys;

use super::error::ConfigError;
use super::values::ReadKey;
use crate::delegation_tokens::TokenConfig;

/// Where the operator hands the key to a broker pod (from the Secret
/// `<cluster>-delegation-token-key`), when the config does not set it.
pub const SECRET_KEY_ENV: &str = "SKEIN_DELEGATION_TOKEN_SECRET_KEY";

pub(super) fn token_config(raw: &BTreeMap<String, String>) -> Result<TokenConfig, ConfigError> {
    let from_env = || std::env::var(SECRET_KEY_ENV).ok();
    Ok(TokenConfig {
        secret: raw
            .get(keys::DELEGATION_TOKEN_SECRET_KEY.name)
            .cloned()
            .or_else(from_env)
            .filter(|s| !s.is_empty())
            .map(|s| Arc::from(s.as_str())),
        max_lifetime_ms: keys::DELEGATION_TOKEN_MAX_LIFETIME_MS.value(raw)?,
        expiry_time_ms: keys::DELEGATION_TOKEN_EXPIRY_TIME_MS.value(raw)?,
        expiry_check_interval_ms: keys::DELEGATION_TOKEN_EXPIRY_CHECK_INTERVAL_MS.value(raw)?,
    })
}
