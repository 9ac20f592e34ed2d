//! Loading groups and committed offsets from `__consumer_offsets`: every
//! partition at start-up, and a partition again whenever this broker's
//! leadership of it is newer than what is in memory (followers replicate
//! the records but do not apply them).

use std::collections::HashMap;

use kafka_protocol::error::ResponseError;
use tracing::{info, warn};

use super::classic_group::{ClassicGroup, JoinResponse, SyncResponse};
use super::coordinator::{GroupCoordinator, State};
use super::log_format::{self, OffsetsRecord};
use super::partition_for;
use crate::coordinator_runtime::{self as runtime, CoordinatorShard, LoadedEpochs, Replayed};
use crate::metadata::CONSUMER_OFFSETS;
use crate::system::{mono_ms, wall_to_mono_ms};

impl GroupCoordinator {
    /// Reads the groups of partition `p` from its log again when this
    /// broker's leadership of it is newer than what is loaded.
    pub(super) fn ensure_loaded(&self, p: i32) {
        let Some(part) = self.ctx.replicas.get(CONSUMER_OFFSETS, p) else {
            return;
        };
        let Some(topic) = self.ctx.metadata.topic(CONSUMER_OFFSETS) else {
            return;
        };
        self.saw_offsets_partitions(topic.partitions.len());
        let n = topic.partitions.len() as i32;
        let mut st = self.shard_at(p);
        let mut load = Load {
            st: &mut st,
            now: mono_ms(),
            records: 0,
            session_ms: self.streams_config().session_timeout_ms.value,
        };
        let (epoch, read) = runtime::ensure_loaded(&mut load, &part, p, n);
        if read {
            info!(
                partition = p,
                leader_epoch = epoch,
                records = load.records,
                "groups of a __consumer_offsets partition loaded"
            );
        }
    }

    /// Removes and returns the waiters of the groups on partition `p` of `n`.
    fn drain_partition<T>(
        waiters: &mut HashMap<(String, String), T>,
        n: i32,
        p: i32,
    ) -> Vec<((String, String), T)> {
        let keys: Vec<(String, String)> = waiters
            .keys()
            .filter(|(g, _)| partition_for(g, n) == p)
            .cloned()
            .collect();
        keys.into_iter()
            .filter_map(|k| waiters.remove(&k).map(|w| (k, w)))
            .collect()
    }

    /// Reads every partition of `__consumer_offsets` from its start, each
    /// into its shard.
    pub(super) fn load(&self) {
        let Some(topic) = self.ctx.metadata.topic(CONSUMER_OFFSETS) else {
            return;
        };
        self.saw_offsets_partitions(topic.partitions.len());
        let now = mono_ms();
        let (mut records, mut groups, mut consumer_groups) = (0usize, 0usize, 0usize);
        for p in 0..topic.partitions.len() as i32 {
            let Some(part) = self.ctx.replicas.get(CONSUMER_OFFSETS, p) else {
                continue;
            };
            let mut st = self.shard_at(p);
            records += self.replay(&mut st, p, part.high_watermark(), now);
            Self::finish_loading(&mut st, now, self.streams_config().session_timeout_ms.value);
            let n = topic.partitions.len() as i32;
            groups += st
                .classic
                .keys()
                .filter(|g| partition_for(g, n) == p)
                .count();
            consumer_groups += st
                .consumer
                .keys()
                .filter(|g| partition_for(g, n) == p)
                .count();
        }
        info!(
            records,
            groups, consumer_groups, "group metadata and offsets loaded"
        );
    }

    /// Applies partition `p` of `__consumer_offsets` from its start up to
    /// `end`; returns the number of group records read.
    fn replay(&self, st: &mut State, p: i32, end: i64, now: i64) -> usize {
        let Some(part) = self.ctx.replicas.get(CONSUMER_OFFSETS, p) else {
            return 0;
        };
        let mut records = 0usize;
        runtime::replay(&part, end, |item| {
            records += usize::from(apply_item(st, p, item, now));
        });
        records
    }

    /// Turns what loading read into groups.
    fn finish_loading(st: &mut State, now: i64, session_ms: i64) {
        // Transactions still open hold their offsets until their marker.
        for (pid, held) in std::mem::take(&mut st.loading_txn) {
            st.pending_txn.entry(pid).or_default().extend(held);
        }
        for (id, stored) in std::mem::take(&mut st.loading) {
            if let Some(g) = stored.build(&id, now) {
                st.classic.remove(&id);
                st.consumer.insert(id, g);
            }
        }
        let streams = std::mem::take(&mut st.loading_streams);
        super::coordinator::streams::finish_loading_streams(st, streams, now, session_ms);
        let offset_groups: Vec<String> = st.offsets.group_ids().cloned().collect();
        for g in offset_groups {
            if !st.consumer.contains_key(&g) && !st.streams.contains_key(&g) {
                st.classic
                    .entry(g.clone())
                    .or_insert_with(|| ClassicGroup::new(&g, now));
            }
        }
    }
}

/// Applies one loaded record.
fn apply_record(st: &mut State, rec: OffsetsRecord, now: i64) {
    match rec {
        OffsetsRecord::Offset {
            group,
            topic,
            partition,
            value: Some(o),
        } => st.offsets.commit(&group, (topic, partition), o),
        OffsetsRecord::Offset {
            group,
            topic,
            partition,
            value: None,
        } => {
            st.offsets.delete(&group, &(topic, partition));
        }
        OffsetsRecord::Group {
            group,
            value: Some(mut g),
        } => {
            // Written on the wall clock; kept on the monotonic one.
            if g.state_since_ms > 0 {
                g.state_since_ms = wall_to_mono_ms(g.state_since_ms);
            }
            st.classic.insert(group, g.restore(now));
        }
        OffsetsRecord::Group { group, value: None } => {
            st.classic.remove(&group);
        }
        OffsetsRecord::Consumer { group, rec } => {
            st.loading.entry(group).or_default().apply(rec);
        }
        OffsetsRecord::Share { group, rec } => {
            super::coordinator::share::apply_share_record(st, group, rec);
        }
        OffsetsRecord::Streams { group, rec } => {
            st.loading_streams.entry(group).or_default().apply(rec);
        }
    }
}

/// Applies one record or marker of partition `p` read from the log;
/// whether it was a group record.
fn apply_item(st: &mut State, p: i32, item: Replayed<'_>, now: i64) -> bool {
    match item {
        // A transaction's end: its offsets count, or not.
        Replayed::Marker { header, marker } => {
            if let Some(held) = st.loading_txn.remove(&header.producer_id) {
                if marker.commit {
                    let at = (header.partition_leader_epoch, header.next_offset());
                    for o in held {
                        st.offsets.commit_replicated(&o.group, o.tp, o.offset, at);
                    }
                }
            }
            false
        }
        Replayed::Record { header, key, value } => match log_format::decode(&key, value.as_ref()) {
            Ok(Some(OffsetsRecord::Offset {
                group,
                topic,
                partition,
                value: Some(o),
            })) if header.is_transactional() => {
                st.loading_txn.entry(header.producer_id).or_default().push(
                    super::offsets::TxnOffset {
                        group,
                        tp: (topic, partition),
                        offset: o,
                    },
                );
                true
            }
            Ok(Some(rec)) => {
                apply_record(st, rec, now);
                true
            }
            Ok(None) => false,
            Err(e) => {
                warn!(partition = p, error = %e, "skipping record");
                false
            }
        },
    }
}

/// The groups of one `__consumer_offsets` partition being read again (in
/// their shard), and how many group records the read found.
struct Load<'a> {
    st: &'a mut State,
    now: i64,
    records: usize,
    /// The session timeout loaded streams-group members start with.
    session_ms: i64,
}

impl CoordinatorShard for Load<'_> {
    fn loaded_epochs(&mut self) -> &mut LoadedEpochs {
        &mut self.st.loaded_epochs
    }

    /// What is in memory for this partition is replaced by what its log
    /// says. Requests parked in a join or sync barrier of those groups
    /// would wait on state that no longer exists: they are answered
    /// NOT_COORDINATOR (as Kafka does when it unloads a group) so their
    /// clients look the coordinator up again and rejoin at once.
    fn unload(&mut self, p: i32, n: i32, epoch: i32) {
        let st = &mut *self.st;
        let joins = GroupCoordinator::drain_partition(&mut st.join_waiters, n, p);
        let syncs = GroupCoordinator::drain_partition(&mut st.sync_waiters, n, p);
        let unloaded = joins.len() + syncs.len();
        for ((_, member), tx) in joins {
            let _ = tx.send(JoinResponse {
                error: Some(ResponseError::NotCoordinator),
                generation: -1,
                member_id: member,
                ..Default::default()
            });
        }
        for (_, tx) in syncs {
            let _ = tx.send(SyncResponse {
                error: Some(ResponseError::NotCoordinator),
                ..Default::default()
            });
        }
        if unloaded > 0 {
            warn!(
                partition = p,
                leader_epoch = epoch,
                parked = unloaded,
                "groups reloaded at a new leader epoch; parked requests answered NOT_COORDINATOR"
            );
        }
        st.classic.retain(|g, _| partition_for(g, n) != p);
        st.consumer.retain(|g, _| partition_for(g, n) != p);
        st.share.retain(|g, _| partition_for(g, n) != p);
        st.streams.retain(|g, _| partition_for(g, n) != p);
        let stale: Vec<String> = st
            .offsets
            .group_ids()
            .filter(|g| partition_for(g, n) == p)
            .cloned()
            .collect();
        for g in stale {
            st.offsets.remove_group(&g);
        }
        for held in st.pending_txn.values_mut() {
            held.retain(|o| partition_for(&o.group, n) != p);
        }
        st.pending_txn.retain(|_, held| !held.is_empty());
    }

    fn replay(&mut self, p: i32, _epoch: i32, item: Replayed<'_>) {
        self.records += usize::from(apply_item(self.st, p, item, self.now));
    }

    fn loaded(&mut self, _p: i32, _n: i32, _epoch: i32) {
        GroupCoordinator::finish_loading(self.st, self.now, self.session_ms);
    }
}
