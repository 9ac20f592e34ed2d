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

/// The automatic balancer: replica moves that bring the brokers to similar
/// bytes on disk and replica counts (after a scale-up, after a broker
/// returns, when one fills up), shown as a plan before they run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BalancerSpec {
    /// On by default.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// `Auto`: a plan runs once it has been shown in `status.balance` for
    /// `planDelaySeconds`. `Manual`: it runs when the KafkaCluster carries
    /// the annotation `skein.dev/approve-balance-plan` with the plan's id.
    #[serde(default)]
    pub approval: BalanceApproval,
    /// Brokers whose bytes on disk are all within this percentage of their
    /// mean (and whose replica counts differ by at most two) are balanced.
    #[serde(default = "default_threshold_percent")]
    #[schemars(range(min = 1, max = 100))]
    pub threshold_percent: i32,
    /// A broker this close to the mean (in bytes) counts as balanced
    /// whatever the percentage: copying less is not worth it.
    #[serde(default = "default_minimum_imbalance_bytes")]
    #[schemars(range(min = 0))]
    pub minimum_imbalance_bytes: i64,
    /// How long an `Auto` plan is shown before it runs.
    #[serde(default = "default_plan_delay_seconds")]
    #[schemars(range(min = 0, max = 86400))]
    pub plan_delay_seconds: i64,
    /// Most replica moves in one plan (the next plan follows when it is
    /// done).
    #[serde(default = "default_max_moves")]
    #[schemars(range(min = 1, max = 10000))]
    pub max_moves_per_plan: i32,
}

/// Who approves a balance plan.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum BalanceApproval {
    #[default]
    Auto,
    Manual,
}

fn default_true() -> bool {
    true
}

fn default_threshold_percent() -> i32 {
    10
}

fn default_minimum_imbalance_bytes() -> i64 {
    1 << 30
}

fn default_plan_delay_seconds() -> i64 {
    30
}

fn default_max_moves() -> i32 {
    200
}

impl Default for BalancerSpec {
    fn default() -> Self {
        BalancerSpec {
            enabled: true,
            approval: BalanceApproval::Auto,
            threshold_percent: default_threshold_percent(),
            minimum_imbalance_bytes: default_minimum_imbalance_bytes(),
            plan_delay_seconds: default_plan_delay_seconds(),
            max_moves_per_plan: default_max_moves(),
        }
    }
}

/// The balancer's current plan (`status.balance`), absent while the
/// brokers are balanced.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BalanceStatus {
    /// Names the plan (a hash of its moves); what a `Manual` approval
    /// quotes.
    pub plan_id: String,
    /// `Proposed` (shown, waiting for its delay or approval) or `Running`.
    pub state: String,
    /// When it was first proposed (RFC 3339).
    pub proposed_at: String,
    /// Bytes the plan copies.
    pub bytes_to_move: i64,
    /// Its moves (the first 50 when there are more: `moveCount` has all).
    pub moves: Vec<BalanceMove>,
    pub move_count: i32,
    /// Bytes on each broker now and after the plan.
    pub brokers: Vec<BrokerBalance>,
}

/// One replica moved by a balance plan.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BalanceMove {
    pub topic: String,
    pub partition: i32,
    pub from_broker: i32,
    pub to_broker: i32,
    pub bytes: i64,
    /// Only the preferred leader moves (`fromBroker` and `toBroker` swap
    /// places in the replica list; nothing is copied).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub leader: bool,
}

/// A broker's bytes before and after a plan.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BrokerBalance {
    pub id: i32,
    pub bytes: i64,
    pub bytes_after: i64,
    pub replicas_after: i32,
}

/// An S3-compatible object store for tiered storage (docs/tiered-storage.md).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TieredStorageSpec {
    /// The bucket (it must exist).
    #[schemars(length(min = 3, max = 63))]
    pub bucket: String,
    /// A prefix for every object of this cluster inside the bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// The S3 endpoint, e.g. `https://s3.eu-west-1.amazonaws.com` or an
    /// S3-compatible server's `http://seaweedfs.storage:8333`; unset: AWS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The region (`us-east-1` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The Secret (in the cluster's namespace) with the access key id and
    /// secret access key, by default under the keys `AWS_ACCESS_KEY_ID` and
    /// `AWS_SECRET_ACCESS_KEY`. Credentials are never read from the node's
    /// instance metadata.
    pub credentials_secret: CredentialsSecret,
}

/// Where the object store's credentials are.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CredentialsSecret {
    /// The Secret's name.
    #[schemars(length(min = 1))]
    pub name: String,
    /// The key holding the access key id.
    #[serde(default = "default_access_key_id_key")]
    pub access_key_id_key: String,
    /// The key holding the secret access key.
    #[serde(default = "default_secret_access_key_key")]
    pub secret_access_key_key: String,
}

fn default_access_key_id_key() -> String {
    "AWS_ACCESS_KEY_ID".into()
}

fn default_secret_access_key_key() -> String {
    "AWS_SECRET_ACCESS_KEY".into()
}
