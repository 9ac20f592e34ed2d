//! SCRAM credentials (KIP-554): what the controller keeps for each user and
//! mechanism. Only the salted form is ever stored: the salt, the iteration
//! count, `StoredKey = H(HMAC(SaltedPassword, "Client Key"))` and
//! `ServerKey = HMAC(SaltedPassword, "Server Key")` (RFC 5802). Brokers
//! derive them from the salted password a client sends in
//! `AlterUserScramCredentials`; the password itself never reaches Skein.

use std::collections::BTreeMap;
use std::fmt;

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
