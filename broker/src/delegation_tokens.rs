//! Delegation tokens (KIP-48), the broker's side: the settings, each
//! token's HMAC and SCRAM credential, and the sweep of expired tokens.
//!
//! A token's HMAC is HMAC-SHA512 of its id under
//! `delegation.token.secret.key`, which every broker holds and the
//! controller never sees (as Kafka's KRaft controller stores no HMAC). A
//! client authenticates with SCRAM (`tokenauth=true`), the token id as user
//! name and the HMAC's base64 as password; the broker derives the SCRAM
//! credential from that password on first use, as Kafka's token cache does
//! (4096 iterations, a random salt), and keeps it while the token exists.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use base64::engine::general_purpose::{STANDARD as B64, URL_SAFE_NO_PAD};
use base64::Engine;
use ring::hmac;
use ring::rand::SecureRandom;
use skein_controller::delegation_tokens::{DelegationToken, DelegationTokens};
use skein_controller::{ScramCredential, ScramMechanism};

/// The `delegation.token.*` settings.
#[derive(Clone, Default)]
pub struct TokenConfig {
    /// `delegation.token.secret.key`; `None`: tokens are off
    /// (DELEGATION_TOKEN_AUTH_DISABLED).
    pub secret: Option<Arc<str>>,
    pub max_lifetime_ms: i64,
    pub expiry_time_ms: i64,
    pub expiry_check_interval_ms: u64,
}

impl std::fmt::Debug for TokenConfig {
    /// The secret stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenConfig")
            .field("enabled", &self.secret.is_some())
            .field("max_lifetime_ms", &self.max_lifetime_ms)
            .field("expiry_time_ms", &self.expiry_time_ms)
            .field("expiry_check_interval_ms", &self.expiry_check_interval_ms)
            .finish()
    }
}

/// HMAC-SHA512 of `token_id` under `secret` (Kafka's `createHmac`).
pub fn hmac_of(secret: &str, token_id: &str) -> Vec<u8> {
    let key = hmac::Key::new(hmac::HMAC_SHA512, secret.as_bytes());
    hmac::sign(&key, token_id.as_bytes()).as_ref().to_vec()
}

/// A new token id: 16 random bytes in URL-safe base64, as Kafka's
/// `Uuid.toString()` writes them.
pub fn new_token_id() -> String {
    let mut bytes = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system random source works");
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Kafka's iteration count for token credentials (`ScramMechanism`'s
/// minimum).
const TOKEN_ITERATIONS: u32 = ScramMechanism::MIN_ITERATIONS;

/// The settings and the credentials derived so far.
pub struct TokenManager {
    pub config: TokenConfig,
    /// Token id → mechanism → credential, derived on first use.
    credentials: Mutex<HashMap<String, BTreeMap<ScramMechanism, ScramCredential>>>,
}

impl TokenManager {
    pub fn new(config: TokenConfig) -> Self {
        TokenManager {
            config,
            credentials: Mutex::default(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.config.secret.is_some()
    }

    /// The token's HMAC (`None`: tokens are off).
    pub fn hmac(&self, token_id: &str) -> Option<Vec<u8>> {
        Some(hmac_of(self.config.secret.as_deref()?, token_id))
    }

    /// The token whose HMAC is `hmac`.
    pub fn find_by_hmac<'a>(
        &self,
        tokens: &'a DelegationTokens,
        hmac: &[u8],
    ) -> Option<&'a DelegationToken> {
        let secret = self.config.secret.as_deref()?;
        tokens
            .values()
            .find(|t| crate::sasl::constant_time_eq(&hmac_of(secret, &t.token_id), hmac))
    }

    /// The SCRAM credential of token `token_id` for `mechanism`, if the
    /// token exists and has not expired at wall-clock `now_ms`.
    pub fn scram_credential(
        &self,
        tokens: &DelegationTokens,
        token_id: &str,
        mechanism: ScramMechanism,
        now_ms: i64,
    ) -> Option<ScramCredential> {
        let token = tokens.get(token_id).filter(|t| !t.expired(now_ms))?;
        let secret = self.config.secret.as_deref()?;
        let mut cache = self.credentials.lock().expect("token credentials lock");
        // Tokens that are gone leave the cache.
        if cache.len() > tokens.len() {
            cache.retain(|id, _| tokens.contains_key(id));
        }
        Some(
            cache
                .entry(token_id.to_string())
                .or_default()
                .entry(mechanism)
                .or_insert_with(|| {
                    // The password a client logs in with: the HMAC's base64.
                    let password = B64.encode(hmac_of(secret, &token.token_id));
                    ScramCredential::from_password(mechanism, &password, TOKEN_ITERATIONS)
                })
                .clone(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(id: &str, expiry_ms: i64) -> DelegationToken {
        DelegationToken {
            token_id: id.into(),
            owner: "User:alice".into(),
            requester: "User:alice".into(),
            renewers: vec![],
            issue_ms: 0,
            max_ms: expiry_ms,
            expiry_ms,
        }
    }

    fn manager() -> TokenManager {
        TokenManager::new(TokenConfig {
            secret: Some("s3cret".into()),
            ..Default::default()
        })
    }

    #[test]
    fn the_hmac_is_hmac_sha512_of_the_id_under_the_secret() {
        // HMAC-SHA512("key", "The quick brown fox jumps over the lazy dog").
        let mac = hmac_of("key", "The quick brown fox jumps over the lazy dog");
        assert_eq!(
            mac.iter().map(|b| format!("{b:02x}")).collect::<String>(),
            "b42af09057bac1e2d41708e48a902e09b5ff7f12ab428a4fe86653c73dd248fb82f948a549f7b791a5b41915ee4d1ec3935357e4e2317250d0372afa2ebeeb3a"
        );
        let id = new_token_id();
        assert_eq!(id.len(), 22, "{id}");
        assert_ne!(id, new_token_id());
    }

    #[test]
    fn a_token_is_found_by_its_hmac_and_its_credential_is_for_the_hmac() {
        let m = manager();
        let tokens: DelegationTokens = [
            ("a".to_string(), token("a", 1_000)),
            ("b".into(), token("b", 1_000)),
        ]
        .into_iter()
        .collect();
        let hmac_b = m.hmac("b").unwrap();
        assert_eq!(m.find_by_hmac(&tokens, &hmac_b).unwrap().token_id, "b");
        assert!(m.find_by_hmac(&tokens, b"nope").is_none());
        for mech in ScramMechanism::ALL {
            let c = m.scram_credential(&tokens, "b", mech, 500).unwrap();
            assert!(c.is_for_password(mech, &B64.encode(&hmac_b)));
            assert_eq!(c.iterations, 4096);
            // Derived once.
            assert_eq!(m.scram_credential(&tokens, "b", mech, 500).unwrap(), c);
        }
        assert!(
            m.scram_credential(&tokens, "b", ScramMechanism::Sha256, 1_001)
                .is_none(),
            "expired"
        );
        assert!(m
            .scram_credential(&tokens, "c", ScramMechanism::Sha256, 0)
            .is_none());
        let off = TokenManager::new(TokenConfig::default());
        assert!(off
            .scram_credential(&tokens, "b", ScramMechanism::Sha256, 0)
            .is_none());
        assert!(off.find_by_hmac(&tokens, &hmac_b).is_none());
    }
}
