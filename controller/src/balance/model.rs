//! What a balance plan is made of: its moves, what it leads to, and when
//! brokers count as balanced.

use std::collections::BTreeMap;

use crate::scaling::Assignment;

/// One replica's move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    pub topic: String,
    pub partition: i32,
    pub from: i32,
    pub to: i32,
    /// The partition's size when planned.
    pub bytes: u64,
    /// Only the preferred leader changes: `from` (first in the list) and
    /// `to` (another replica) swap places; nothing is copied.
    pub leader: bool,
}

/// Applies a move to a replica list.
pub fn apply_move(replicas: &mut [i32], from: i32, to: i32, leader: bool) {
    if leader {
        if let (Some(i), Some(j)) = (
            replicas.iter().position(|b| *b == from),
            replicas.iter().position(|b| *b == to),
        ) {
            replicas.swap(i, j);
        }
    } else {
        for r in replicas.iter_mut() {
            if *r == from {
                *r = to;
            }
        }
    }
}

pub(super) fn spread<T: Ord + Copy + std::ops::Sub<Output = T> + Default>(
    m: &BTreeMap<i32, T>,
) -> T {
    match (m.values().max(), m.values().min()) {
        (Some(hi), Some(lo)) => *hi - *lo,
        _ => T::default(),
    }
}

/// A plan and what it does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub moves: Vec<Move>,
    /// Bytes per broker now and after the plan.
    pub before: BTreeMap<i32, u64>,
    pub after: BTreeMap<i32, u64>,
    /// Replicas per broker after the plan.
    pub replicas_after: BTreeMap<i32, usize>,
}

impl Plan {
    /// The replica lists the plan leads to, for the partitions it changes.
    pub fn targets(&self, current: &Assignment) -> Assignment {
        let mut out: Assignment = BTreeMap::new();
        for m in &self.moves {
            let key = (m.topic.clone(), m.partition);
            let replicas = out
                .entry(key.clone())
                .or_insert_with(|| current.get(&key).cloned().unwrap_or_default());
            apply_move(replicas, m.from, m.to, m.leader);
        }
        out
    }

    /// Bytes the plan copies.
    pub fn bytes_to_move(&self) -> u64 {
        self.moves
            .iter()
            .filter(|m| !m.leader)
            .map(|m| m.bytes)
            .sum()
    }
}

/// When the brokers count as balanced: every broker's bytes within
/// `percent` of the mean, or within `min_bytes` of it (moving less than
/// that is not worth a copy: small clusters are left alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Threshold {
    pub percent: u32,
    pub min_bytes: u64,
}

/// Whether every broker's bytes are within the threshold of their mean.
pub fn within(bytes: &BTreeMap<i32, u64>, t: Threshold) -> bool {
    if bytes.is_empty() {
        return true;
    }
    let total: u64 = bytes.values().sum();
    let mean = total as f64 / bytes.len() as f64;
    let slack = (mean * f64::from(t.percent) / 100.0).max(t.min_bytes as f64);
    bytes.values().all(|b| (*b as f64 - mean).abs() <= slack)
}
