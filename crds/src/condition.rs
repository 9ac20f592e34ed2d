//! Status conditions shared by both resources: `Ready`, `Reconciling` and
//! `Degraded`, written as standard `metav1.Condition`s.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// The condition types the operator writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionType {
    /// Everything asked for is in place and serving.
    Ready,
    /// The operator is still converging (objects applied, pods not all ready yet).
    Reconciling,
    /// Something is wrong that needs a human: invalid spec, offline partitions, …
    Degraded,
    /// The brokers' volumes are growing to a larger `spec.storage.size`
    /// (False once every volume has it, or when the storage refused).
    Resizing,
    /// A broker is gone and self-healing is waiting out its grace period or
    /// re-creating its replicas on other brokers.
    SelfHealing,
    /// The brokers carry similar bytes and replica counts (False while a
    /// balance plan is shown or running).
    Balanced,
}

impl ConditionType {
    /// The `type` string as it appears in `.status.conditions`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionType::Ready => "Ready",
            ConditionType::Reconciling => "Reconciling",
            ConditionType::Degraded => "Degraded",
            ConditionType::Resizing => "Resizing",
            ConditionType::SelfHealing => "SelfHealing",
            ConditionType::Balanced => "Balanced",
        }
    }
}

/// A condition's `status` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    /// The `status` string as Kubernetes spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(b: bool) -> Self {
        if b {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        }
    }
}

/// Builds a condition. `lastTransitionTime` is carried over from `previous`
/// when the status did not change, so it records transitions and not every
/// reconcile (which would also make status patches never settle).
pub fn condition(
    previous: &[Condition],
    type_: ConditionType,
    status: ConditionStatus,
    reason: &str,
    message: impl Into<String>,
    observed_generation: Option<i64>,
    now: Time,
) -> Condition {
    let last_transition_time = previous
        .iter()
        .find(|c| c.type_ == type_.as_str() && c.status == status.as_str())
        .map(|c| c.last_transition_time.clone())
        .unwrap_or(now);
    Condition {
        type_: type_.as_str().to_string(),
        status: status.as_str().to_string(),
        reason: reason.to_string(),
        message: message.into(),
        observed_generation,
        last_transition_time,
    }
}

/// Finds a condition by type.
pub fn find(conditions: &[Condition], type_: ConditionType) -> Option<&Condition> {
    conditions.iter().find(|c| c.type_ == type_.as_str())
}

/// Whether the condition of this type is present with status `True`.
pub fn is_true(conditions: &[Condition], type_: ConditionType) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == "True")
}
