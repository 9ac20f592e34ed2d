//! A member of a classic group, as JoinGroup describes it.

use bytes::Bytes;

/// One member of a classic (JoinGroup/SyncGroup) group.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassicMember {
    pub id: String,
    /// `group.instance.id` of a static member (KIP-345).
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    /// The protocols the member supports, in its order of preference, each
    /// with its metadata (for consumers: a `ConsumerProtocolSubscription`).
    pub protocols: Vec<(String, Bytes)>,
    /// What the leader assigned at the last SyncGroup.
    pub assignment: Bytes,
    /// Waiting in the join barrier for the JoinGroup response.
    pub awaiting_join: bool,
    /// Waiting for the leader's SyncGroup.
    pub awaiting_sync: bool,
    /// Last JoinGroup, SyncGroup or Heartbeat: the session is measured from it.
    pub last_heartbeat_ms: i64,
}

impl ClassicMember {
    /// The metadata the member sent for `protocol` (empty if it does not support it).
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    pub fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(n, _)| n == protocol)
    }

    /// The member's most preferred protocol among `candidates`.
    pub fn vote<'a>(&'a self, candidates: &[String]) -> Option<&'a str> {
        self.protocols
            .iter()
            .map(|(n, _)| n.as_str())
            .find(|n| candidates.iter().any(|c| c == n))
    }

    /// Whether the session expired at `now_ms`. Members parked in the join
    /// barrier or in SyncGroup are kept alive, as in Kafka: the barrier has
    /// its own deadline, and a member waiting for the leader's assignment
    /// cannot heartbeat meanwhile (when the leader dies instead of syncing,
    /// only the leader expires and the parked members are told to rejoin).
    pub fn session_expired(&self, now_ms: i64) -> bool {
        !self.awaiting_join
            && !self.awaiting_sync
            && now_ms >= self.last_heartbeat_ms + self.session_timeout_ms as i64
    }

    /// Whether the protocol names are the same as `other`'s, metadata included.
    pub fn same_protocols(&self, other: &[(String, Bytes)]) -> bool {
        self.protocols == other
    }
}
