//! The topic configs that name throttled replicas (KIP-73):
//! `leader.replication.throttled.replicas` and
//! `follower.replication.throttled.replicas`, each `*` or a comma-separated
//! list of `partition:broker`. What `kafka-reassign-partitions --throttle`
//! writes before a move and `--verify` removes after it; the controller
//! does the same for the moves it starts itself (self-healing).

use std::collections::BTreeMap;

use crate::model::BrokerId;

/// The replicas a leader sends to under `leader.replication.throttled.rate`.
pub const LEADER_REPLICAS: &str = crate::topic_config::keys::LEADER_REPLICATION_THROTTLED_REPLICAS;
/// The replicas that fetch under `follower.replication.throttled.rate`.
pub const FOLLOWER_REPLICAS: &str =
    crate::topic_config::keys::FOLLOWER_REPLICATION_THROTTLED_REPLICAS;

/// Adds `partition:broker` for each broker to the list under `key`; `*`
/// already names everything. Returns whether the configs changed.
pub fn add(
    configs: &mut BTreeMap<String, String>,
    key: &str,
    partition: u32,
    brokers: &[BrokerId],
) -> bool {
    let current = configs.get(key).map(String::as_str).unwrap_or("");
    if current.trim() == "*" {
        return false;
    }
    let mut entries = entries(current);
    let before = entries.len();
    for b in brokers {
        let e = format!("{partition}:{b}");
        if !entries.contains(&e) {
            entries.push(e);
        }
    }
    if entries.len() == before {
        return false;
    }
    configs.insert(key.to_owned(), entries.join(","));
    true
}

/// Removes every entry of `partition` from the list under `key` (the key
/// goes when nothing is left; `*` is kept). Returns whether the configs
/// changed.
pub fn remove_partition(configs: &mut BTreeMap<String, String>, key: &str, partition: u32) -> bool {
    let Some(current) = configs.get(key) else {
        return false;
    };
    if current.trim() == "*" {
        return false;
    }
    let prefix = format!("{partition}:");
    let entries = entries(current);
    let kept: Vec<String> = entries
        .iter()
        .filter(|e| !e.starts_with(&prefix))
        .cloned()
        .collect();
    if kept.len() == entries.len() {
        return false;
    }
    if kept.is_empty() {
        configs.remove(key);
    } else {
        configs.insert(key.to_owned(), kept.join(","));
    }
    true
}

/// Whether the list under `key` names some replica of `partition`.
pub fn names_partition(configs: &BTreeMap<String, String>, key: &str, partition: u32) -> bool {
    let prefix = format!("{partition}:");
    configs
        .get(key)
        .is_some_and(|v| entries(v).iter().any(|e| e.starts_with(&prefix)))
}

fn entries(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_added_once_and_removed_per_partition() {
        let mut c = BTreeMap::new();
        assert!(add(&mut c, LEADER_REPLICAS, 3, &[1, 2]));
        assert!(!add(&mut c, LEADER_REPLICAS, 3, &[2]));
        assert!(add(&mut c, LEADER_REPLICAS, 13, &[4]));
        assert_eq!(c[LEADER_REPLICAS], "3:1,3:2,13:4");
        assert!(names_partition(&c, LEADER_REPLICAS, 13));
        // "3:" must not take "13:" with it.
        assert!(remove_partition(&mut c, LEADER_REPLICAS, 3));
        assert_eq!(c[LEADER_REPLICAS], "13:4");
        assert!(!names_partition(&c, LEADER_REPLICAS, 3));
        assert!(remove_partition(&mut c, LEADER_REPLICAS, 13));
        assert!(!c.contains_key(LEADER_REPLICAS));
        assert!(!remove_partition(&mut c, LEADER_REPLICAS, 13));
    }

    #[test]
    fn a_wildcard_is_left_as_it_is() {
        let mut c = BTreeMap::from([(FOLLOWER_REPLICAS.to_owned(), "*".to_owned())]);
        assert!(!add(&mut c, FOLLOWER_REPLICAS, 0, &[1]));
        assert!(!remove_partition(&mut c, FOLLOWER_REPLICAS, 0));
        assert_eq!(c[FOLLOWER_REPLICAS], "*");
    }
}
