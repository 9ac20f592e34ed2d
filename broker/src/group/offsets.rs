//! Committed offsets per group, and their retention (`offsets.retention.minutes`).

use std::collections::{BTreeMap, HashMap};

pub use crate::partition::TopicPartition;

/// One committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
}

/// Where an offset commit's record is in `__consumer_offsets`: the leader
/// epoch it was appended at and the offset after it. Positions order the
/// commits of one partition whatever order their replication is noticed in.
pub type LogPosition = (i32, i64);

/// One offset committed inside a transaction not yet ended
/// (TxnOffsetCommit; see `txn_offsets.rs`).
#[derive(Debug, Clone)]
pub struct TxnOffset {
    pub group: String,
    pub tp: TopicPartition,
    pub offset: CommittedOffset,
}

/// Every group's committed offsets.
#[derive(Debug, Default, Clone)]
pub struct OffsetStore {
    groups: BTreeMap<String, BTreeMap<TopicPartition, CommittedOffset>>,
    /// The position of the commit each offset came from (commits made
    /// through this coordinator; offsets read from the log have none).
    positions: HashMap<(String, TopicPartition), LogPosition>,
}

impl OffsetStore {
    /// An offset read from the log (loading): it replaces what was there.
    pub fn commit(&mut self, group: &str, tp: TopicPartition, o: CommittedOffset) {
        self.positions.remove(&(group.to_string(), tp.clone()));
        self.groups
            .entry(group.to_string())
            .or_default()
            .insert(tp, o);
    }

    /// An offset whose commit record the ISR now has, written at `at`.
    /// A commit written later that was applied first wins; false then.
    pub fn commit_replicated(
        &mut self,
        group: &str,
        tp: TopicPartition,
        o: CommittedOffset,
        at: LogPosition,
    ) -> bool {
        let key = (group.to_string(), tp);
        if self.positions.get(&key).is_some_and(|p| *p > at) {
            return false;
        }
        self.groups
            .entry(key.0.clone())
            .or_default()
            .insert(key.1.clone(), o);
        self.positions.insert(key, at);
        true
    }

    /// Removes one offset; true if it existed.
    pub fn delete(&mut self, group: &str, tp: &TopicPartition) -> bool {
        let Some(g) = self.groups.get_mut(group) else {
            return false;
        };
        let found = g.remove(tp).is_some();
        self.positions.remove(&(group.to_string(), tp.clone()));
        if g.is_empty() {
            self.groups.remove(group);
        }
        found
    }

    pub fn get(&self, group: &str, topic: &str, partition: i32) -> Option<&CommittedOffset> {
        self.groups
            .get(group)
            .and_then(|g| g.get(&(topic.to_string(), partition)))
    }

    /// The offsets of `group`, if it has any.
    pub fn group(&self, group: &str) -> Option<&BTreeMap<TopicPartition, CommittedOffset>> {
        self.groups.get(group)
    }

    /// Removes every offset of `group`, returning their keys.
    pub fn remove_group(&mut self, group: &str) -> Vec<TopicPartition> {
        let removed: Vec<TopicPartition> = self
            .groups
            .remove(group)
            .map(|g| g.into_keys().collect())
            .unwrap_or_default();
        for tp in &removed {
            self.positions.remove(&(group.to_string(), tp.clone()));
        }
        removed
    }

    pub fn group_ids(&self) -> impl Iterator<Item = &String> {
        self.groups.keys()
    }
}

/// What an offset's age is measured from, by the group's situation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retention {
    /// The group has members: its offsets are kept.
    Active,
    /// A consumer group without members since this time: all its offsets
    /// expire together, `retention` after the group became empty (KIP-211).
    EmptySince(i64),
    /// A group only used to store offsets (no protocol, e.g. standalone
    /// consumers and admin commits): each offset expires `retention` after
    /// its own commit.
    Standalone,
}

/// The offsets of one group that expired at `now_ms`.
pub fn expired_offsets(
    offsets: &BTreeMap<TopicPartition, CommittedOffset>,
    basis: Retention,
    now_ms: i64,
    retention_ms: i64,
) -> Vec<TopicPartition> {
    offsets
        .iter()
        .filter(|(_, o)| match basis {
            Retention::Active => false,
            Retention::EmptySince(t) => now_ms >= t.max(o.commit_timestamp_ms) + retention_ms,
            Retention::Standalone => now_ms >= o.commit_timestamp_ms + retention_ms,
        })
        .map(|(tp, _)| tp.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn off(ts: i64) -> CommittedOffset {
        CommittedOffset {
            offset: 5,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: ts,
        }
    }

    #[test]
    fn retention_by_group_situation() {
        let day = 86_400_000;
        let mut m = BTreeMap::new();
        m.insert(("t".to_string(), 0), off(0));
        m.insert(("t".to_string(), 1), off(5 * day));
        let r = 7 * day;
        assert!(expired_offsets(&m, Retention::Active, 100 * day, r).is_empty());
        // Standalone: each offset by its own commit time.
        assert_eq!(
            expired_offsets(&m, Retention::Standalone, 7 * day, r),
            vec![("t".to_string(), 0)]
        );
        // Empty since day 6: nothing before day 13 (commit-time of the newer offset is older).
        assert!(expired_offsets(&m, Retention::EmptySince(6 * day), 13 * day - 1, r).is_empty());
        assert_eq!(
            expired_offsets(&m, Retention::EmptySince(6 * day), 13 * day, r).len(),
            2
        );
    }

    #[test]
    fn store_commit_delete() {
        let mut s = OffsetStore::default();
        s.commit("g", ("t".into(), 0), off(1));
        s.commit("g", ("t".into(), 0), off(2));
        assert_eq!(s.get("g", "t", 0).unwrap().commit_timestamp_ms, 2);
        assert!(s.delete("g", &("t".into(), 0)));
        assert!(s.group("g").is_none(), "a group without offsets is gone");
        assert!(!s.delete("g", &("t".into(), 0)));
    }

    #[test]
    fn replicated_commits_apply_in_log_order() {
        let mut s = OffsetStore::default();
        let tp = || ("t".to_string(), 0);
        // Written at (epoch 3, 20) and (3, 30); the later one is noticed first.
        assert!(s.commit_replicated("g", tp(), off(30), (3, 30)));
        assert!(!s.commit_replicated("g", tp(), off(20), (3, 20)));
        assert_eq!(s.get("g", "t", 0).unwrap().commit_timestamp_ms, 30);
        // A new leader epoch orders after any offset of an older one.
        assert!(s.commit_replicated("g", tp(), off(5), (4, 5)));
        assert_eq!(s.get("g", "t", 0).unwrap().commit_timestamp_ms, 5);
        // Deleting forgets the position too; a value read from the log has none.
        assert!(s.delete("g", &tp()));
        assert!(s.commit_replicated("g", tp(), off(1), (1, 1)));
        s.commit("g", tp(), off(7));
        assert!(s.commit_replicated("g", tp(), off(2), (0, 2)));
        assert!(!s.remove_group("g").is_empty());
        assert!(s.positions.is_empty());
    }
}
