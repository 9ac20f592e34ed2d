//! The cluster a KafkaCluster's spec asks for, read once per reconcile so
//! every step works from the same numbers (a spec is never re-read halfway).

use std::collections::BTreeSet;

use skein_crds::KafkaCluster;

/// What the spec wants of the broker set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredCluster {
    /// `spec.replicas`: brokers `0..replicas` are wanted.
    pub replicas: i32,
}

impl DesiredCluster {
    /// The desired cluster of `kc`'s spec.
    pub fn of(kc: &KafkaCluster) -> Self {
        DesiredCluster {
            replicas: kc.spec.replicas,
        }
    }

    /// The brokers a scale-down from `current` StatefulSet replicas removes
    /// (empty when nothing shrinks): they are drained, and take no new
    /// replica meanwhile.
    pub fn leaving(&self, current: Option<i32>) -> BTreeSet<i32> {
        (self.replicas..current.unwrap_or(0)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_shrink_has_leaving_brokers() {
        let desired = DesiredCluster { replicas: 3 };
        assert_eq!(desired.leaving(Some(5)), BTreeSet::from([3, 4]));
        assert!(desired.leaving(Some(3)).is_empty());
        assert!(desired.leaving(Some(1)).is_empty());
        assert!(desired.leaving(None).is_empty());
    }
}
