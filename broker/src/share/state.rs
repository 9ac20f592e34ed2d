//! A share-partition's persisted state as the share coordinator keeps it
//! (Kafka's `ShareCoordinatorShard` and `PersisterStateBatchCombiner`;
//! docs/design/share-groups-kafka-4.4.md, section 8): a start offset and
//! state batches, to which each write from the partition's leader merges
//! its changed batches, and the epochs that fence a stale leader.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;

use super::partition::{RecordState, StateBatch};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersistedState {
    /// The group's epoch when the state was initialized; a write of an
    /// older one is FENCED_STATE_EPOCH.
    pub state_epoch: i32,
    /// The partition leader epoch of the last reader; a write of an older
    /// leader is FENCED_LEADER_EPOCH.
    pub leader_epoch: i32,
    /// -1: never consumed (`share.auto.offset.reset` decides).
    pub start_offset: i64,
    pub batches: Vec<StateBatch>,
}

/// The most offsets the batches of one write may span past the start
/// offset. A leader writes at most its in-flight window (at most
/// `group.share.max.partition.max.record.locks`, 10,000, plus the rest of a
/// log batch); state is kept per offset, so a hostile writer's ranges must
/// not make the coordinator walk billions of offsets.
pub const MAX_STATE_OFFSETS: i128 = 1 << 20;

/// `update` merged over `current`, both cut at `start`: where ranges
/// overlap the batch with the higher delivery count wins, and on a tie the
/// higher state; equal neighbours are joined.
pub fn merge(current: &[StateBatch], update: &[StateBatch], start: i64) -> Vec<StateBatch> {
    let mut offsets: BTreeMap<i64, (RecordState, i16)> = BTreeMap::new();
    for b in current.iter().chain(update) {
        for o in b.first.max(start)..=b.last {
            let new = (b.state, b.delivery_count);
            offsets
                .entry(o)
                .and_modify(|old| {
                    if (new.1, new.0 as i8) > (old.1, old.0 as i8) {
                        *old = new;
                    }
                })
                .or_insert(new);
        }
    }
    let mut out: Vec<StateBatch> = Vec::new();
    for (o, (state, delivery_count)) in offsets {
        match out.last_mut() {
            Some(b)
                if b.last + 1 == o && b.state == state && b.delivery_count == delivery_count =>
            {
                b.last = o
            }
            _ => out.push(StateBatch {
                first: o,
                last: o,
                state,
                delivery_count,
            }),
        }
    }
    out
}

impl PersistedState {
    /// InitializeShareGroupState: a new state (overwriting any), unless the
    /// stored one is of a later group epoch.
    pub fn initialize(
        stored: Option<&PersistedState>,
        state_epoch: i32,
        start_offset: i64,
    ) -> Result<PersistedState, ResponseError> {
        if stored.is_some_and(|s| s.state_epoch > state_epoch) {
            return Err(ResponseError::FencedStateEpoch);
        }
        Ok(PersistedState {
            state_epoch,
            leader_epoch: 0,
            start_offset,
            batches: Vec::new(),
        })
    }

    /// ReadShareGroupState by the leader of `leader_epoch`: a later leader
    /// takes the state over (its epoch is stored, fencing the old leader's
    /// writes); an older one is FENCED_LEADER_EPOCH.
    pub fn read(&mut self, leader_epoch: i32) -> Result<&PersistedState, ResponseError> {
        if leader_epoch < 0 {
            return Err(ResponseError::InvalidRequest);
        }
        if self.leader_epoch > leader_epoch {
            return Err(ResponseError::FencedLeaderEpoch);
        }
        self.leader_epoch = leader_epoch;
        Ok(self)
    }

    /// WriteShareGroupState: the leader's changed batches merged in; the
    /// start offset never moves back.
    pub fn write(
        &mut self,
        state_epoch: i32,
        leader_epoch: i32,
        start_offset: i64,
        batches: &[StateBatch],
    ) -> Result<(), ResponseError> {
        if leader_epoch < 0 || state_epoch < 0 {
            return Err(ResponseError::InvalidRequest);
        }
        if self.leader_epoch > leader_epoch {
            return Err(ResponseError::FencedLeaderEpoch);
        }
        if self.state_epoch > state_epoch {
            return Err(ResponseError::FencedStateEpoch);
        }
        let start = self.start_offset.max(start_offset);
        let mut span: i128 = 0;
        for b in batches {
            if b.first > b.last {
                return Err(ResponseError::InvalidRequest);
            }
            span += (b.last as i128 - b.first.max(start) as i128 + 1).max(0);
        }
        if span > MAX_STATE_OFFSETS {
            return Err(ResponseError::InvalidRequest);
        }
        self.start_offset = start;
        self.batches = merge(&self.batches, batches, self.start_offset);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RecordState::*;

    #[test]
    fn a_write_spanning_too_many_offsets_is_refused_without_walking_them() {
        let mut st = PersistedState {
            state_epoch: 1,
            leader_epoch: 1,
            start_offset: 0,
            batches: vec![],
        };
        let huge = StateBatch {
            first: 0,
            last: i64::MAX,
            state: Archived,
            delivery_count: 1,
        };
        assert_eq!(
            st.write(1, 1, 0, &[huge]),
            Err(ResponseError::InvalidRequest)
        );
        let backwards = StateBatch {
            first: 5,
            last: 4,
            state: Archived,
            delivery_count: 1,
        };
        assert_eq!(
            st.write(1, 1, 0, &[backwards]),
            Err(ResponseError::InvalidRequest)
        );
        assert!(st.batches.is_empty());
    }

    fn b(first: i64, last: i64, state: RecordState, delivery_count: i16) -> StateBatch {
        StateBatch {
            first,
            last,
            state,
            delivery_count,
        }
    }

    #[test]
    fn merging_keeps_the_later_delivery_and_cuts_at_the_start() {
        let current = [b(0, 9, Available, 1)];
        let update = [b(3, 4, Acknowledged, 1), b(5, 5, Available, 2)];
        assert_eq!(
            merge(&current, &update, 2),
            vec![
                b(2, 2, Available, 1),
                b(3, 4, Acknowledged, 1),
                b(5, 5, Available, 2),
                b(6, 9, Available, 1),
            ]
        );
        // An older delivery never overwrites a newer one.
        assert_eq!(
            merge(&[b(0, 0, Archived, 3)], &[b(0, 0, Available, 2)], 0),
            vec![b(0, 0, Archived, 3)]
        );
    }

    #[test]
    fn epochs_fence_stale_leaders_and_groups() {
        let mut s = PersistedState::initialize(None, 1, -1).unwrap();
        s.read(5).unwrap();
        assert_eq!(s.read(4).err(), Some(ResponseError::FencedLeaderEpoch));
        assert_eq!(
            s.write(1, 4, 0, &[]).err(),
            Some(ResponseError::FencedLeaderEpoch)
        );
        assert_eq!(
            s.write(0, 5, 0, &[]).err(),
            Some(ResponseError::FencedStateEpoch)
        );
        s.write(1, 5, 10, &[b(10, 12, Acknowledged, 1)]).unwrap();
        s.write(1, 5, 8, &[]).unwrap();
        assert_eq!(s.start_offset, 10, "the start never moves back");
        assert_eq!(
            PersistedState::initialize(Some(&s), 0, 0).err(),
            Some(ResponseError::FencedStateEpoch)
        );
        let again = PersistedState::initialize(Some(&s), 2, 100).unwrap();
        assert!(again.batches.is_empty() && again.start_offset == 100);
    }
}
