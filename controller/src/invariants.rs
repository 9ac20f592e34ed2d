//! Invariants of the metadata image, checked when an image is loaded and,
//! in tests, after every event.

use std::collections::BTreeSet;

use crate::model::{BrokerId, MetadataImage, PartitionState, NO_LEADER};

/// Structural invariants every image must satisfy; `from_image` refuses an
/// image that breaks one. Returns the first violation found.
pub fn check_image(image: &MetadataImage) -> Result<(), String> {
    for (id, broker) in &image.brokers {
        if *id != broker.id {
            return Err(format!("broker keyed {id} has id {}", broker.id));
        }
        if broker.broker_epoch >= image.cluster.next_broker_epoch {
            return Err(format!(
                "broker {id} epoch {} not below next_broker_epoch {}",
                broker.broker_epoch, image.cluster.next_broker_epoch
            ));
        }
    }
    if image.cluster.next_producer_id < 0 {
        return Err("next_producer_id is negative".into());
    }
    let mut ids = BTreeSet::new();
    for (name, topic) in &image.topics {
        if *name != topic.spec.name {
            return Err(format!("topic keyed {name} is named {}", topic.spec.name));
        }
        if !ids.insert(topic.spec.topic_id) {
            return Err(format!("topic id {} used twice", topic.spec.topic_id));
        }
        if topic.spec.partitions as usize != topic.partitions.len() || topic.partitions.is_empty() {
            return Err(format!(
                "topic {name} says {} partitions, has {}",
                topic.spec.partitions,
                topic.partitions.len()
            ));
        }
        for (p, state) in topic.partitions.iter().enumerate() {
            check_partition(state).map_err(|e| format!("{name}-{p}: {e} in {state:?}"))?;
        }
    }
    Ok(())
}

fn distinct(list: &[BrokerId]) -> bool {
    list.iter().collect::<BTreeSet<_>>().len() == list.len()
}

/// Invariants of one partition: leader ∈ ISR ⊆ replicas, ELR ⊆ replicas and
/// apart from the ISR, nothing repeated, an empty ISR only without a leader,
/// reassignment sets consistent.
pub fn check_partition(s: &PartitionState) -> Result<(), String> {
    if s.replicas.is_empty() {
        return Err("no replicas".into());
    }
    if !distinct(&s.replicas) {
        return Err("replicas not on distinct brokers".into());
    }
    if s.isr.is_empty() && s.leader != NO_LEADER {
        return Err("empty ISR with a leader".into());
    }
    if !distinct(&s.elr) || !s.elr.iter().all(|b| s.replicas.contains(b)) {
        return Err("ELR has duplicates or non-replicas".into());
    }
    if s.elr.iter().any(|b| s.isr.contains(b)) {
        return Err("ELR overlaps the ISR".into());
    }
    if !distinct(&s.last_known_elr)
        || !s.last_known_elr.iter().all(|b| s.replicas.contains(b))
        || s.last_known_elr
            .iter()
            .any(|b| s.isr.contains(b) || s.elr.contains(b))
    {
        return Err("last known ELR has duplicates, non-replicas or ISR/ELR members".into());
    }
    if !distinct(&s.isr) {
        return Err("ISR has duplicates".into());
    }
    if !s.isr.iter().all(|b| s.replicas.contains(b)) {
        return Err("ISR not a subset of replicas".into());
    }
    if s.leader != NO_LEADER && !s.isr.contains(&s.leader) {
        return Err("leader not in ISR".into());
    }
    if s.leader_epoch < 0 || s.partition_epoch < 0 {
        return Err("negative epoch".into());
    }
    let adding_ok = s.adding_replicas.iter().all(|b| s.replicas.contains(b));
    let removing_ok = s.removing_replicas.iter().all(|b| s.replicas.contains(b));
    let disjoint = !s
        .adding_replicas
        .iter()
        .any(|b| s.removing_replicas.contains(b));
    if !adding_ok
        || !removing_ok
        || !disjoint
        || !distinct(&s.adding_replicas)
        || !distinct(&s.removing_replicas)
    {
        return Err("inconsistent adding/removing replicas".into());
    }
    if s.target_replicas().is_empty() {
        return Err("reassignment removes every replica".into());
    }
    Ok(())
}

/// What the controller maintains after handling any event, beyond the
/// structural invariants: leaders are eligible brokers, a led partition's
/// ISR holds only eligible brokers, and a partition is offline only when no
/// ISR or ELR member could lead it.
pub fn check_settled(image: &MetadataImage) -> Result<(), String> {
    check_image(image)?;
    let eligible = |b: BrokerId| image.brokers.get(&b).is_some_and(|i| i.is_eligible());
    for (name, topic) in &image.topics {
        for (p, s) in topic.partitions.iter().enumerate() {
            if s.leader != NO_LEADER {
                if !eligible(s.leader) {
                    return Err(format!("{name}-{p}: leader {} not eligible", s.leader));
                }
                if let Some(b) = s.isr.iter().find(|b| !eligible(**b)) {
                    return Err(format!("{name}-{p}: ISR member {b} not eligible in {s:?}"));
                }
            } else if let Some(b) = s.isr.iter().chain(&s.elr).find(|b| eligible(**b)) {
                return Err(format!(
                    "{name}-{p}: offline although ISR/ELR member {b} is eligible"
                ));
            }
            if s.is_reassigning() && s.target_replicas().iter().all(|b| s.isr.contains(b)) {
                return Err(format!(
                    "{name}-{p}: reassignment in sync but not completed"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(replicas: &[BrokerId], isr: &[BrokerId], leader: BrokerId) -> PartitionState {
        PartitionState::new(replicas.to_vec(), isr.to_vec(), leader)
    }

    #[test]
    fn partition_violations_are_found() {
        assert!(check_partition(&state(&[1, 2], &[1, 2], 1)).is_ok());
        assert!(check_partition(&state(&[1, 2], &[2], NO_LEADER)).is_ok());
        assert!(check_partition(&state(&[1, 1], &[1], 1)).is_err());
        assert!(check_partition(&state(&[1, 2], &[], NO_LEADER)).is_ok());
        assert!(check_partition(&state(&[1, 2], &[], 1)).is_err());
        let mut s = state(&[1, 2], &[1], 1);
        s.elr = vec![1];
        assert!(check_partition(&s).is_err(), "ELR overlapping the ISR");
        s.elr = vec![3];
        assert!(check_partition(&s).is_err(), "ELR member not a replica");
        assert!(check_partition(&state(&[1, 2], &[1, 3], 1)).is_err());
        assert!(check_partition(&state(&[1, 2], &[2], 1)).is_err());
        let mut s = state(&[1, 2], &[1, 2], 1);
        s.adding_replicas = vec![3];
        assert!(check_partition(&s).is_err());
    }
}
