//! The balancer's planner: replica moves that bring the brokers to similar
//! bytes on disk, similar replica counts and similar numbers of preferred
//! leaders. A pure function over an assignment and partition sizes; the
//! operator shows the plan, waits for its approval and carries it out as
//! throttled reassignments.
//!
//! Two greedy searches are run and the better ending kept (see
//! [`plan`]): one evens out replica counts first, choosing replicas so
//! that bytes follow, then evens bytes by moves and exchanges that keep
//! counts even; the other weighs bytes alone. No move goes onto a broker
//! the partition already uses or leaves fewer racks under a partition, no
//! replica the plan placed moves again, a replica moves in place (same
//! position in the list), and a replica that is not the partition's
//! preferred leader moves first, so leadership mostly stays. Preferred
//! leaders are then spread by swapping replicas within partitions.

mod model;
mod search;

use std::collections::BTreeMap;

use model::spread;
pub use model::{apply_move, within, Move, Plan, Threshold};
use search::{Partitions, Search};

use crate::scaling::Assignment;

/// Plans at most `max_moves` moves over `hosts` (live brokers that may
/// hold replicas, with their racks). `sizes` holds each partition's bytes
/// (missing: 0). Replicas on brokers outside `hosts` stay and count for
/// nobody. Nothing is planned while the brokers' bytes are within the
/// threshold of their mean and their replica and preferred-leader counts
/// differ by at most two (so a finished plan is not followed by small ones
/// as partitions grow).
///
/// Otherwise two searches run from the same start, aiming at half the
/// threshold ([`aim`]), and the plan keeps the one that ends within the
/// threshold with the most even replica counts, then within the aim
/// (failing the threshold, the one closest to even bytes; then the fewer
/// moves):
/// - counts first ([`Search::even_counts`], then [`Search::even_bytes`]):
///   new brokers take replicas of every size, and counts end within one;
/// - bytes alone ([`Search::weighted_bytes`]): fewer, larger replicas move,
///   for the shapes (a few partitions of very different sizes) where even
///   counts and even bytes cannot both be had.
pub fn plan(
    current: &Assignment,
    sizes: &BTreeMap<(String, i32), u64>,
    hosts: &BTreeMap<i32, Option<String>>,
    threshold: Threshold,
    max_moves: usize,
) -> Plan {
    let parts = Partitions::new(current, sizes);
    let start = Search::new(&parts, current, hosts);
    let before = start.bytes.clone();
    let balanced = within(&start.bytes, threshold)
        && spread(&start.counts) <= 2
        && spread(&start.leaders()) <= 2;
    let chosen = if balanced {
        start
    } else {
        let aim = aim(threshold);
        let mut counted = start.clone();
        counted.even_counts(max_moves);
        counted.even_bytes(aim, max_moves);
        let mut weighted = start.clone();
        weighted.weighted_bytes(aim, max_moves);
        let mut chosen = if weighted.outcome(aim, threshold) < counted.outcome(aim, threshold) {
            weighted
        } else {
            counted
        };
        chosen.spread_leaders(max_moves);
        chosen
    };
    Plan {
        before,
        after: chosen.bytes.clone(),
        replicas_after: chosen.counts.clone(),
        moves: chosen.moves,
    }
}

/// What a plan aims at once it runs: half the threshold (at least 1%), so
/// that a finished plan leaves room for partitions to grow unevenly before
/// the next one (a plan ending at the threshold's edge was followed by
/// another as soon as a partition grew).
fn aim(t: Threshold) -> Threshold {
    Threshold {
        percent: (t.percent / 2).max(1),
        min_bytes: t.min_bytes / 2,
    }
}

#[cfg(test)]
mod tests;
