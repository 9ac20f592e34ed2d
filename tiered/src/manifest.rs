//! A partition's remote state: the list of copied segments, written as one
//! JSON object per leader epoch next to the data (docs/tiered-storage.md).
//! Everything here is pure; `RemoteStore` reads and writes it.
//!
//! A segment is in the manifest only once all of its objects are complete
//! (Kafka's `COPY_SEGMENT_FINISHED`); objects that no manifest lists are
//! invisible and get deleted as orphans.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// One copied segment, as listed in a manifest.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct RemoteSegment {
    /// The copy's id: part of every object name of this segment.
    pub id: Uuid,
    /// The first offset in the segment.
    pub base_offset: i64,
    /// The last offset in the segment (inclusive).
    pub end_offset: i64,
    /// The `.log`'s size in bytes (Kafka's `segmentSizeInBytes`).
    pub size_bytes: u64,
    /// The largest record timestamp in the segment.
    pub max_timestamp_ms: i64,
    /// The leader epochs that start inside the segment: (epoch, start offset),
    /// ascending. The first entry is the epoch in force at `base_offset`.
    pub epochs: Vec<(i32, i64)>,
    /// Whether the segment has no aborted transactions (then no `.txnindex`
    /// object exists).
    pub txn_index_empty: bool,
    /// The broker that copied it.
    pub broker_id: i32,
    /// When the copy finished (ms since the epoch).
    pub copied_at_ms: i64,
}

impl RemoteSegment {
    /// Whether `offset` is inside the segment.
    pub fn contains(&self, offset: i64) -> bool {
        self.base_offset <= offset && offset <= self.end_offset
    }
}

/// The partition's remote state: written only by the leader of `leader_epoch`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Manifest {
    /// The epoch of the leader that wrote this manifest (names its object).
    pub leader_epoch: i32,
    /// The partition's log start offset as the remote side knows it (moved by
    /// retention and DeleteRecords).
    pub log_start_offset: i64,
    /// The copied segments, ascending base offset, not overlapping.
    pub segments: Vec<RemoteSegment>,
}

impl Manifest {
    /// A manifest of `leader_epoch` with no segments.
    pub fn new(leader_epoch: i32, log_start_offset: i64) -> Self {
        Manifest {
            leader_epoch,
            log_start_offset,
            segments: Vec::new(),
        }
    }

    /// The end offset of the last segment, or -1 when nothing is copied
    /// (Kafka's highest remote offset, answered to ListOffsets -5).
    pub fn highest_offset(&self) -> i64 {
        self.segments.last().map_or(-1, |s| s.end_offset)
    }

    /// The first base offset in the store, if any segment is.
    pub fn lowest_offset(&self) -> Option<i64> {
        self.segments.first().map(|s| s.base_offset)
    }

    /// The segment holding `offset`, else the first one after it (a read of
    /// an offset in a gap, e.g. one compacted or aborted away, continues
    /// there); `None` past the last segment.
    pub fn segment_for(&self, offset: i64) -> Option<&RemoteSegment> {
        let i = self.segments.partition_point(|s| s.end_offset < offset);
        self.segments.get(i)
    }

    /// The segment that follows `seg` (the next one a sequential reader
    /// needs; what the read cache prefetches).
    pub fn next_after(&self, seg: &RemoteSegment) -> Option<&RemoteSegment> {
        let i = self
            .segments
            .partition_point(|s| s.end_offset <= seg.end_offset);
        self.segments.get(i)
    }

    /// The total `.log` bytes of the copied segments.
    pub fn size_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.size_bytes).sum()
    }

    /// Whether the manifest lists the copy `id`.
    pub fn contains_id(&self, id: Uuid) -> bool {
        self.segments.iter().any(|s| s.id == id)
    }

    /// Adds a copied segment, keeping the base-offset order.
    pub fn insert(&mut self, seg: RemoteSegment) {
        let i = self
            .segments
            .partition_point(|s| s.base_offset <= seg.base_offset);
        self.segments.insert(i, seg);
    }

    /// Drops the copy `id` from the list (Kafka's `DELETE_SEGMENT_STARTED`:
    /// the objects are deleted after the manifest without it is written).
    pub fn remove(&mut self, id: Uuid) -> Option<RemoteSegment> {
        let i = self.segments.iter().position(|s| s.id == id)?;
        Some(self.segments.remove(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(n: u128, base: i64, end: i64) -> RemoteSegment {
        RemoteSegment {
            id: Uuid::from_u128(n),
            base_offset: base,
            end_offset: end,
            size_bytes: (end - base + 1) as u64 * 10,
            max_timestamp_ms: end,
            epochs: vec![(0, base)],
            txn_index_empty: true,
            broker_id: 1,
            copied_at_ms: 0,
        }
    }

    fn manifest() -> Manifest {
        let mut m = Manifest::new(3, 0);
        // Inserted out of order; a gap between 19 and 30.
        m.insert(seg(2, 10, 19));
        m.insert(seg(3, 30, 39));
        m.insert(seg(1, 0, 9));
        m
    }

    #[test]
    fn segments_stay_in_offset_order() {
        let m = manifest();
        let bases: Vec<i64> = m.segments.iter().map(|s| s.base_offset).collect();
        assert_eq!(bases, vec![0, 10, 30]);
        assert_eq!(m.highest_offset(), 39);
        assert_eq!(m.lowest_offset(), Some(0));
        assert_eq!(m.size_bytes(), 300);
        assert_eq!(Manifest::default().highest_offset(), -1);
    }

    #[test]
    fn segment_for_finds_the_holder_or_the_next() {
        let m = manifest();
        let base_of = |o| m.segment_for(o).map(|s| s.base_offset);
        assert_eq!(base_of(-5), Some(0));
        assert_eq!(base_of(0), Some(0));
        assert_eq!(base_of(9), Some(0));
        assert_eq!(base_of(10), Some(10));
        assert_eq!(base_of(19), Some(10));
        assert_eq!(base_of(25), Some(30));
        assert_eq!(base_of(39), Some(30));
        assert_eq!(base_of(40), None);
    }

    #[test]
    fn next_after_walks_the_list() {
        let m = manifest();
        let first = &m.segments[0];
        let second = m.next_after(first).expect("a second segment");
        assert_eq!(second.base_offset, 10);
        let third = m.next_after(second).expect("a third segment");
        assert_eq!(third.base_offset, 30);
        assert!(m.next_after(third).is_none());
    }

    #[test]
    fn remove_and_json_round_trip() {
        let mut m = manifest();
        let gone = m.remove(Uuid::from_u128(2)).expect("listed");
        assert_eq!(gone.base_offset, 10);
        assert!(!m.contains_id(Uuid::from_u128(2)));
        assert!(m.remove(Uuid::from_u128(2)).is_none());
        let json = serde_json::to_string(&m).expect("encodes");
        let back: Manifest = serde_json::from_str(&json).expect("decodes");
        assert_eq!(back, m);
    }
}
