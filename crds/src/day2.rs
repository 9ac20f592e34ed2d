//! Day-2 settings of a KafkaCluster: what happens when a broker is lost
//! for good, and how fast replicas that move are copied.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// When the replicas of a lost broker are re-created elsewhere.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SelfHealingSpec {
    /// On by default.
    #[serde(default = "default_self_healing_enabled")]
    pub enabled: bool,
    /// How long a broker may be gone (no session with the controller: its
    /// pod unschedulable, its node or volume lost) before each replica it
    /// held gets a new home on another broker. A broker back within it
    /// keeps its replicas.
    #[serde(default = "default_broker_loss_grace_seconds")]
    #[schemars(range(min = 10, max = 604800))]
    pub broker_loss_grace_seconds: i64,
}

fn default_self_healing_enabled() -> bool {
    true
}

fn default_broker_loss_grace_seconds() -> i64 {
    1800
}

impl Default for SelfHealingSpec {
    fn default() -> Self {
        SelfHealingSpec {
            enabled: default_self_healing_enabled(),
            broker_loss_grace_seconds: default_broker_loss_grace_seconds(),
        }
    }
}

/// `spec.reassignmentThrottleBytesPerSecond` by default: 50 MiB/s.
pub(crate) fn default_reassignment_throttle() -> i64 {
    50 * 1024 * 1024
}
