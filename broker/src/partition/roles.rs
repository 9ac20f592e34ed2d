//! Role changes the controller orders: becoming leader or follower at a
//! leader epoch, or stopping; and the topic's `min.insync.replicas`.

use super::{FollowerProgress, Partition, Role};
use crate::error::ApiError;

impl Partition {
    /// Sets `min.insync.replicas`; a lower value may commit at once what
    /// the ISR already holds (and a fetch session skipping this partition
    /// must hear of the new high watermark).
    pub fn set_min_isr(&self, min_isr: usize) {
        let mut st = self.state();
        let min_isr = min_isr.max(1);
        if st.min_isr == min_isr {
            return;
        }
        st.min_isr = min_isr;
        let leo = self.log.read().expect("log lock").log_end_offset();
        self.maybe_advance_hw(&mut st, leo);
        drop(st);
        self.notify_changed();
    }

    /// Becomes leader at `leader_epoch`. Returns false (and changes
    /// nothing) when the instruction is older than what this replica knows.
    pub fn make_leader(
        &self,
        leader_epoch: i32,
        partition_epoch: i32,
        replicas: Vec<i32>,
        isr: Vec<i32>,
        now_ms: i64,
    ) -> Result<bool, ApiError> {
        let mut st = self.state();
        let same_term = leader_epoch == st.leader_epoch && st.role == Role::Leader;
        if leader_epoch < st.leader_epoch || (same_term && partition_epoch < st.partition_epoch) {
            return Ok(false);
        }
        let new_term = leader_epoch != st.leader_epoch || st.role != Role::Leader;
        let leo = {
            let mut log = self.log.write().expect("log lock");
            if new_term {
                let leo = log.log_end_offset();
                // Later epochs (from a previous term that wrote nothing) are
                // never in our cache here: epochs only grow.
                log.assign_leader_epoch(leader_epoch, leo)?;
                st.epoch_start_offset = leo;
                st.leader_since_mono_ms = crate::system::mono_ms();
                st.followers.clear();
            }
            let leo = log.log_end_offset();
            st.high_watermark = st.high_watermark.clamp(log.log_start_offset(), leo);
            leo
        };
        for r in &replicas {
            if *r != self.local_id {
                // A fresh leader gives every ISR member a full lag window.
                st.followers
                    .entry(*r)
                    .or_insert_with(|| FollowerProgress::new(now_ms, now_ms));
            }
        }
        st.followers.retain(|id, _| replicas.contains(id));
        st.role = Role::Leader;
        st.leader_epoch = leader_epoch;
        st.partition_epoch = partition_epoch;
        st.replicas = replicas;
        st.isr = isr;
        st.pending_isr = None;
        st.held_since_ms = None;
        self.maybe_advance_hw(&mut st, leo);
        drop(st);
        self.notify_changed();
        Ok(true)
    }

    /// Becomes a follower of `leader` at `leader_epoch`. Returns false when
    /// the instruction is stale or changes nothing.
    pub fn make_follower(
        &self,
        leader: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        replicas: Vec<i32>,
    ) -> bool {
        let mut st = self.state();
        if leader_epoch < st.leader_epoch {
            return false;
        }
        let same = st.role == (Role::Follower { leader }) && st.leader_epoch == leader_epoch;
        st.role = Role::Follower { leader };
        st.leader_epoch = leader_epoch;
        st.partition_epoch = partition_epoch;
        st.replicas = replicas;
        st.isr.clear();
        st.pending_isr = None;
        st.held_since_ms = None;
        st.followers.clear();
        if !same {
            st.leader_high_watermark = -1;
        }
        drop(st);
        self.notify_changed();
        !same
    }

    /// Stops serving (the data stays).
    pub fn make_stopped(&self) {
        self.state().role = Role::Stopped;
        self.notify_changed();
    }
}
