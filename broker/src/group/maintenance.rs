//! The coordinator's timers: join/sync barriers and sessions of classic
//! groups, sessions and revocation deadlines of consumer groups, offset
//! retention (`offsets.retention.minutes`, checked every
//! `offsets.retention.check.interval.ms`), and the group gauges. Each pass
//! takes the shards one at a time, so a timer never holds up the groups of
//! a shard it is not working on.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tracing::{info, warn};

use super::classic_group::GroupState;
use super::consumer_group_records;
use super::coordinator::{GroupCoordinator, State};
use super::log_format;
use super::offsets::{expired_offsets, Retention};
use crate::coordinator_runtime as runtime;
use crate::system::{mono_ms, mono_to_wall_ms, now_ms};

impl GroupCoordinator {
    /// Loads groups and offsets from `__consumer_offsets` and starts the timers.
    pub fn start(self: &Arc<Self>) {
        self.load();
        let mut last_metrics = 0i64;
        runtime::every(
            &self.ctx,
            Duration::from_millis(100),
            self,
            move |groups: &Arc<Self>| {
                let now = mono_ms();
                groups.tick(now);
                if now - last_metrics >= 5000 {
                    last_metrics = now;
                    groups.update_metrics();
                }
            },
        );
    }

    /// Timers: barriers, sessions, and (every retention check interval)
    /// offset expiry, shard by shard.
    pub fn tick(&self, now: i64) {
        // Partitions whose leadership came to this broker are read before
        // their timers run: what is in memory for them may be older than
        // their log (a load at start, or an earlier leadership).
        for p in self.partitions_led_here() {
            self.ensure_loaded(p);
        }
        for shard in self.shards() {
            let mut st = shard.lock().expect("group coordinator shard lock");
            self.tick_shard(&mut st, now);
        }
    }

    fn tick_shard(&self, st: &mut State, now: i64) {
        self.expire_share_members(st, now);
        self.expire_streams_members(st, now);
        let ids: Vec<String> = st.classic.keys().cloned().collect();
        for id in ids {
            let mut effects = Vec::new();
            if let Some(g) = st.classic.get_mut(&id) {
                g.tick(&self.cfg, now, &mut effects);
            }
            if !effects.is_empty() {
                self.apply(st, &id, effects);
            }
        }
        // Each group's own session timeout (GROUP configs) applies.
        let image = self.ctx.metadata.image();
        let cfg_of = |id: &str| {
            self.cfg.for_group(image.resource_configs.get(
                skein_controller::resource_configs::ConfigResourceKind::Group,
                id,
            ))
        };
        let expiring: Vec<String> = st
            .consumer
            .values()
            .filter(|g| !g.expired_members(&cfg_of(&g.id), now).is_empty())
            .filter(|g| self.serves(st, &g.id))
            .map(|g| g.id.clone())
            .collect();
        for id in expiring {
            let Some(g) = st.consumer.get_mut(&id) else {
                continue;
            };
            let old = consumer_group_records::consumer_group_records(g);
            g.tick(&cfg_of(&id), now);
            let records = consumer_group_records::diff_records(
                &old,
                &consumer_group_records::consumer_group_records(g),
            );
            if let Err(e) = self.append(&id, &records) {
                warn!(group = %id, error = %e.message, "cannot persist expired members");
            }
        }
        if now - st.last_retention_ms >= self.cfg.offsets_retention_check_interval_ms {
            st.last_retention_ms = now;
            self.expire_offsets(st, now_ms());
        }
    }

    /// Drops expired offsets (tombstones) and then groups left with neither
    /// members nor offsets. `now` is the wall clock (commit times are); the
    /// groups keep their times on the monotonic one.
    fn expire_offsets(&self, st: &mut State, now: i64) {
        let groups: Vec<String> = st.offsets.group_ids().cloned().collect();
        for group in groups {
            let basis = if let Some(cg) = st.consumer.get(&group) {
                if cg.is_empty() {
                    Retention::EmptySince(mono_to_wall_ms(cg.state_since_ms))
                } else {
                    Retention::Active
                }
            } else if let Some(g) = st.classic.get(&group) {
                match (g.state, &g.protocol_type) {
                    (GroupState::Empty, None) => Retention::Standalone,
                    (GroupState::Empty, Some(_)) => {
                        Retention::EmptySince(mono_to_wall_ms(g.state_since_ms))
                    }
                    _ => Retention::Active,
                }
            } else {
                Retention::Standalone
            };
            let Some(offsets) = st.offsets.group(&group) else {
                continue;
            };
            let expired = expired_offsets(offsets, basis, now, self.cfg.offsets_retention_ms);
            if expired.is_empty() {
                continue;
            }
            let records: Vec<(Bytes, Option<Bytes>)> = expired
                .iter()
                .map(|(t, p)| (log_format::offset_key(&group, t, *p), None))
                .collect();
            if self.append(&group, &records).is_ok() {
                info!(group, offsets = expired.len(), "committed offsets expired");
                for tp in &expired {
                    st.offsets.delete(&group, tp);
                }
            }
        }
        let empty: Vec<String> = st
            .classic
            .values()
            .filter(|g| g.state == GroupState::Empty && g.pending_members.is_empty())
            .map(|g| g.id.clone())
            .chain(
                st.consumer
                    .values()
                    .filter(|g| g.is_empty())
                    .map(|g| g.id.clone()),
            )
            .chain(
                st.streams
                    .values()
                    .filter(|g| g.members.is_empty())
                    .map(|g| g.id.clone()),
            )
            .filter(|id| st.offsets.group(id).is_none())
            .collect();
        for id in empty {
            let _ = self.remove_group(st, &id);
        }
    }

    /// Refreshes the group gauges (state counts, members, lag). The shards
    /// are copied from one at a time; the lag is computed with none held.
    pub fn update_metrics(&self) {
        let mut groups: Vec<(String, String, usize)> = Vec::new();
        let mut committed: std::collections::HashMap<String, Vec<(String, i32, i64)>> =
            Default::default();
        for shard in self.shards() {
            let st = shard.lock().expect("group coordinator shard lock");
            groups.extend(
                st.classic
                    .values()
                    .map(|g| (g.id.clone(), g.state.name().to_string(), g.members.len()))
                    .chain(
                        st.consumer
                            .values()
                            .map(|g| (g.id.clone(), g.state_name().to_string(), g.members.len())),
                    )
                    .chain(
                        st.streams
                            .values()
                            .map(|g| (g.id.clone(), g.state().to_string(), g.members.len())),
                    )
                    .chain(st.share.values().map(|e| {
                        (
                            e.group.id.clone(),
                            e.group.state().to_string(),
                            e.group.members.len(),
                        )
                    })),
            );
            for id in st.offsets.group_ids() {
                let offsets = st.offsets.group(id).into_iter().flatten();
                committed.insert(
                    id.clone(),
                    offsets
                        .map(|((t, p), o)| (t.clone(), *p, o.offset))
                        .collect(),
                );
            }
        }
        groups.sort();
        let lag = |group: &str| -> Vec<(String, i32, i64)> {
            committed
                .get(group)
                .into_iter()
                .flatten()
                .filter_map(|(t, p, offset)| {
                    let part = self.ctx.replicas.get(t, *p)?;
                    Some((t.clone(), *p, (part.high_watermark() - offset).max(0)))
                })
                .collect()
        };
        self.metrics.update(&groups, lag);
    }
}
