//! Delegation tokens (KIP-48): what the controller keeps of each token.
//!
//! As Kafka's KRaft controller keeps `DelegationTokenRecord`s, the token's
//! HMAC is never stored: every broker derives it from the token id with the
//! cluster's `delegation.token.secret.key`, which only brokers hold. The
//! controller keeps who owns a token, who may renew it, and its times
//! (wall-clock milliseconds since the epoch, as clients see them).
//!
//! Brokers decide what a request may do (ownership, expiry, lifetimes:
//! their configs and clock); the controller stores the outcome, refuses an
//! id that exists already, and refuses to change a token that is gone.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One token.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegationToken {
    pub token_id: String,
    /// The principal the token authenticates as (`User:alice`).
    pub owner: String,
    /// The principal that asked for it (Kafka 3.3+: may differ from the
    /// owner when a token is created on another's behalf).
    pub requester: String,
    /// Principals that may renew and expire it, besides the owner and the
    /// requester.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub renewers: Vec<String>,
    pub issue_ms: i64,
    /// The token cannot be renewed past this.
    pub max_ms: i64,
    /// The token authenticates until this (renewals move it).
    pub expiry_ms: i64,
}

impl DelegationToken {
    /// The owner, the requester, or a renewer.
    pub fn owner_or_renewer(&self, principal: &str) -> bool {
        self.owner == principal
            || self.requester == principal
            || self.renewers.iter().any(|r| r == principal)
    }

    /// Whether it has expired at wall-clock `now_ms`.
    pub fn expired(&self, now_ms: i64) -> bool {
        self.expiry_ms < now_ms || self.max_ms < now_ms
    }
}

/// Every token by id.
pub type DelegationTokens = BTreeMap<String, DelegationToken>;

/// Checks what the controller accepts for a new token.
pub fn check_new(token: &DelegationToken) -> Result<(), String> {
    if token.token_id.is_empty() {
        return Err("the token id is empty".into());
    }
    if token.owner.is_empty() || token.requester.is_empty() {
        return Err("the token has no owner or requester".into());
    }
    if token.expiry_ms > token.max_ms || token.issue_ms > token.expiry_ms {
        return Err(format!(
            "the token's times are out of order: issued {}, expires {}, max {}",
            token.issue_ms, token.expiry_ms, token.max_ms
        ));
    }
    Ok(())
}
