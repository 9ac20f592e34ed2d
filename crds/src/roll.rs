//! How the operator restarts brokers (`spec.rollPolicy`) and what it
//! reports about a roll (`status.roll`, `status.brokerImage`,
//! `status.imageRollback`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What every broker restart the operator makes (a new config, image,
/// certificate or volume) waits for. Restarts go one broker at a time,
/// highest ordinal first; the next starts only once the broker restarted
/// last is ready (its `/readyz`: in session with the controller and back in
/// the ISR of every partition it follows) and no partition is under its
/// `min.insync.replicas`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollPolicySpec {
    /// Also wait until no partition has fewer in-sync replicas than its
    /// replication factor (on by default). Off, a partition whose ISR is
    /// short of its replica set but at `min.insync.replicas` or more does
    /// not hold the roll; a broker whose restart would take an ISR below
    /// `min.insync.replicas` still waits.
    #[serde(default = "default_true")]
    pub wait_for_full_replication: bool,
    /// How long a restarted broker may take to be ready, as a duration
    /// (`90s`, `15m`, `1h30m`). Past it, a roll to a new image is undone:
    /// the brokers go back to the image they ran before, and the status
    /// and an Event say why. Any other roll holds and says so.
    #[serde(default = "default_roll_timeout")]
    #[schemars(regex(pattern = r"^([0-9]+(h|m|s))+$"))]
    pub timeout: String,
}

fn default_true() -> bool {
    true
}

fn default_roll_timeout() -> String {
    "30m".into()
}

impl Default for RollPolicySpec {
    fn default() -> Self {
        RollPolicySpec {
            wait_for_full_replication: true,
            timeout: default_roll_timeout(),
        }
    }
}

impl RollPolicySpec {
    /// `timeout` in seconds (`None` if it is not a duration).
    pub fn timeout_seconds(&self) -> Option<u64> {
        parse_duration(&self.timeout)
    }
}

/// Seconds of a duration such as `90s`, `15m` or `1h30m`.
pub fn parse_duration(s: &str) -> Option<u64> {
    let mut total: u64 = 0;
    let mut digits = String::new();
    for c in s.trim().chars() {
        match c {
            '0'..='9' => digits.push(c),
            'h' | 'm' | 's' if !digits.is_empty() => {
                let n: u64 = digits.parse().ok()?;
                let unit = match c {
                    'h' => 3600,
                    'm' => 60,
                    _ => 1,
                };
                total = total.checked_add(n.checked_mul(unit)?)?;
                digits.clear();
            }
            _ => return None,
        }
    }
    (digits.is_empty() && !s.trim().is_empty()).then_some(total)
}

/// A rolling restart in progress (`status.roll`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollStatus {
    /// `restarted/total`, for `kubectl get kafkacluster`.
    pub progress: String,
    /// Broker pods on the new pod template.
    pub updated_replicas: i32,
    /// Broker pods in all.
    pub replicas: i32,
    /// The pod restarted last, while the roll waits for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// When that pod was restarted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarted_at: Option<Time>,
    /// The uid of the pod restarted last (its successor has another), its
    /// broker's epoch then, and the image it is restarted on: with
    /// `restartedAt`, what an operator taking over the roll (a failover)
    /// needs to go on waiting for it, timeout included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_epoch: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// What the roll waits for now.
    pub waiting_for: String,
}

/// A roll to a new image undone because a restarted broker was not ready
/// within `spec.rollPolicy.timeout` (`status.imageRollback`). It stays while
/// `spec.image` names the failed image; a different image starts a new roll.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageRollbackStatus {
    /// The image that did not become ready.
    pub failed_image: String,
    /// The image the brokers run again.
    pub restored_image: String,
    /// The pod that waited.
    pub pod: String,
    /// When the roll was undone.
    pub time: Time,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::parse_duration;

    #[test]
    fn durations_are_hours_minutes_and_seconds() {
        assert_eq!(parse_duration("90s"), Some(90));
        assert_eq!(parse_duration("15m"), Some(900));
        assert_eq!(parse_duration("1h30m"), Some(5400));
        assert_eq!(parse_duration("2h0m5s"), Some(7205));
        for bad in ["", "m", "10", "5d", "1.5h", "-1m", "1h 2m"] {
            assert_eq!(parse_duration(bad), None, "{bad:?}");
        }
    }
}
