//! SCRAM credentials (KIP-554): what the controller keeps for each user and
//! mechanism. Only the salted form is ever stored: the salt, the iteration
//! count, `StoredKey = H(HMAC(SaltedPassword, "Client Key"))` and
//! `ServerKey = HMAC(SaltedPassword, "Server Key")` (RFC 5802). Brokers
//! derive them from the salted password a client sends in
//! `AlterUserScramCredentials`; the password itself never reaches Skein.

use std::collections::BTreeMap;
use std::fmt;

use ring::{digest, hmac, pbkdf2, rand::SecureRandom};
use serde::{Deserialize, Serialize};

/// A SCRAM mechanism, with Kafka's numbering on the wire
/// (`ScramMechanism` in `AlterUserScramCredentials`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ScramMechanism {
    #[serde(rename = "SCRAM-SHA-256")]
    Sha256,
    #[serde(rename = "SCRAM-SHA-512")]
    Sha512,
}

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// The SASL mechanism name (`SCRAM-SHA-256`).
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Kafka's wire code: 1 for SHA-256, 2 for SHA-512 (0 is "unknown").
    pub fn code(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_code(code: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.code() == code)
    }

    /// Kafka's bounds on the iteration count (`ScramMechanism` in Kafka:
    /// at least 4096, at most 16384).
    pub const MIN_ITERATIONS: u32 = 4096;
    pub const MAX_ITERATIONS: u32 = 16384;
}

impl fmt::Display for ScramMechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One user's credential for one mechanism.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: u32,
}

impl fmt::Debug for ScramCredential {
    /// Keys are left out of logs and debug output.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramCredential")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// Every user's credentials: user name → mechanism → credential.
pub type ScramCredentials = BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>;

/// A credential to add or replace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramUpsertion {
    pub user: String,
    pub mechanism: ScramMechanism,
    pub credential: ScramCredential,
}

/// Checks what the controller accepts for a credential: a user name and
/// Kafka's iteration bounds. Brokers check the same before asking, so a
/// client sees the error for its own entry.
pub fn check_upsertion(u: &ScramUpsertion) -> Result<(), String> {
    if u.user.is_empty() {
        return Err("the user name is empty".into());
    }
    if u.credential.iterations < ScramMechanism::MIN_ITERATIONS {
        return Err(format!(
            "too few iterations for {}: {} (at least {})",
            u.mechanism,
            u.credential.iterations,
            ScramMechanism::MIN_ITERATIONS
        ));
    }
    if u.credential.iterations > ScramMechanism::MAX_ITERATIONS {
        return Err(format!(
            "too many iterations for {}: {} (at most {})",
            u.mechanism,
            u.credential.iterations,
            ScramMechanism::MAX_ITERATIONS
        ));
    }
    if u.credential.salt.is_empty()
        || u.credential.stored_key.is_empty()
        || u.credential.server_key.is_empty()
    {
        return Err("salt, stored key and server key must not be empty".into());
    }
    Ok(())
}

fn hmac_alg(m: ScramMechanism) -> hmac::Algorithm {
    match m {
        ScramMechanism::Sha256 => hmac::HMAC_SHA256,
        ScramMechanism::Sha512 => hmac::HMAC_SHA512,
    }
}

/// The mechanism's hash function.
pub fn digest_alg(m: ScramMechanism) -> &'static digest::Algorithm {
    match m {
        ScramMechanism::Sha256 => &digest::SHA256,
        ScramMechanism::Sha512 => &digest::SHA512,
    }
}

/// `HMAC(key, data)` with the mechanism's hash.
pub fn mac(m: ScramMechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac_alg(m), key), data)
        .as_ref()
        .to_vec()
}

/// The stored form of a salted password: `StoredKey = H(HMAC(salted,
/// "Client Key"))`, `ServerKey = HMAC(salted, "Server Key")`.
pub fn credential_from_salted_password(
    mechanism: ScramMechanism,
    salted_password: &[u8],
    salt: &[u8],
    iterations: u32,
) -> ScramCredential {
    let client_key = mac(mechanism, salted_password, b"Client Key");
    ScramCredential {
        salt: salt.to_vec(),
        stored_key: digest::digest(digest_alg(mechanism), &client_key)
            .as_ref()
            .to_vec(),
        server_key: mac(mechanism, salted_password, b"Server Key"),
        iterations,
    }
}

/// `Hi(password, salt, i)`: PBKDF2 with the mechanism's HMAC.
pub fn salt_password(
    mechanism: ScramMechanism,
    password: &str,
    salt: &[u8],
    iterations: u32,
) -> Vec<u8> {
    let alg = match mechanism {
        ScramMechanism::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
        ScramMechanism::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
    };
    let mut out = vec![0u8; digest_alg(mechanism).output_len()];
    let iterations = std::num::NonZeroU32::new(iterations.max(1)).expect("at least 1");
    pbkdf2::derive(alg, iterations, salt, password.as_bytes(), &mut out);
    out
}

impl ScramCredential {
    /// A credential for `password` with a fresh random salt (what
    /// `kafka-configs --add-config 'SCRAM-SHA-512=[password=…]'` makes on
    /// the client side).
    pub fn from_password(mechanism: ScramMechanism, password: &str, iterations: u32) -> Self {
        let mut salt = [0u8; 32];
        ring::rand::SystemRandom::new()
            .fill(&mut salt)
            .expect("the system random source works");
        let salted = salt_password(mechanism, password, &salt, iterations);
        credential_from_salted_password(mechanism, &salted, &salt, iterations)
    }

    /// Whether this credential was made from `password` (its salt and
    /// iteration count applied to the password give the same keys).
    pub fn is_for_password(&self, mechanism: ScramMechanism, password: &str) -> bool {
        let salted = salt_password(mechanism, password, &self.salt, self.iterations);
        let other =
            credential_from_salted_password(mechanism, &salted, &self.salt, self.iterations);
        other.stored_key == self.stored_key && other.server_key == self.server_key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_from_a_password_is_recognised_by_that_password_only() {
        for m in ScramMechanism::ALL {
            let c = ScramCredential::from_password(m, "s3cret", 4096);
            assert_eq!(c.iterations, 4096);
            assert_eq!(c.salt.len(), 32);
            assert!(c.is_for_password(m, "s3cret"));
            assert!(!c.is_for_password(m, "s3cret!"));
            let again = ScramCredential::from_password(m, "s3cret", 4096);
            assert_ne!(again.salt, c.salt, "every credential gets its own salt");
            assert_ne!(again.stored_key, c.stored_key);
        }
    }
}
