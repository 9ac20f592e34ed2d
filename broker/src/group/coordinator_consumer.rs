//! The KIP-848 side of the group coordinator: ConsumerGroupHeartbeat under
//! the group's shard lock, and the topics a subscription may resolve to
//! (built once per metadata view, filtered by what the member may see).

use std::sync::Arc;

use super::*;

impl GroupCoordinator {
    /// A ConsumerGroupHeartbeat. `visible` says which topics the member
    /// may see (Describe): a regex subscription resolves only to those.
    pub fn consumer_heartbeat(
        &self,
        group: &str,
        mut hb: Heartbeat,
        visible: &dyn Fn(&str) -> bool,
    ) -> Result<HeartbeatReply, HeartbeatError> {
        let topics = self.visible_topics(visible);
        let mut st = self.shard_of(group);
        // A pattern new to the group is compiled with the shard unlocked: a
        // heavy one must not hold up the other groups of the partition.
        let new_pattern = st
            .consumer
            .get(group)
            .map_or(hb.subscribed_topic_regex.as_deref(), |g| {
                g.regex_to_compile(&hb)
            })
            .filter(|r| !r.is_empty())
            .map(str::to_string);
        if let Some(pattern) = new_pattern {
            drop(st);
            hb.compiled_regex = Some(subscription_regex::compile(&pattern));
            st = self.shard_of(group);
        }
        let now = crate::system::mono_ms();
        // The group's own session timeout and heartbeat interval (GROUP
        // configs), as of this heartbeat.
        let image = self.ctx.metadata.image();
        let cfg = self.cfg.for_group(image.resource_configs.get(
            skein_controller::resource_configs::ConfigResourceKind::Group,
            group,
        ));
        if st.share.contains_key(group) || st.streams.contains_key(group) {
            return Err(HeartbeatError {
                code: ResponseError::GroupIdNotFound,
                message: format!("Group {group} is not a consumer group."),
            });
        }
        if let Some(g) = st.classic.get(group) {
            if !g.is_empty() {
                return Err(HeartbeatError {
                    code: ResponseError::GroupIdNotFound,
                    message: format!("group {group} is a classic group with members"),
                });
            }
            st.classic.remove(group);
        }
        if hb.member_epoch != 0 && !st.consumer.contains_key(group) {
            return Err(HeartbeatError {
                code: ResponseError::UnknownMemberId,
                message: format!("group {group} does not exist"),
            });
        }
        // A regular heartbeat (the steady state) records what it changes
        // instead of copying the group: nothing is encoded or written
        // unless something persistent changed.
        if let Some(g) = st.consumer.get_mut(group).filter(|g| g.is_regular(&hb)) {
            #[cfg(debug_assertions)]
            let whole_before = consumer_group_records::consumer_group_records(g);
            let (reply, changes) = g.regular_heartbeat(hb, &topics, &cfg, now);
            let records = consumer_group_records::heartbeat_records(g, &changes);
            #[cfg(debug_assertions)]
            debug_assert_eq!(
                records,
                consumer_group_records::diff_records(
                    &whole_before,
                    &consumer_group_records::consumer_group_records(g)
                ),
                "a regular heartbeat's records are its whole group's diff"
            );
            if let Err(e) = self.append(group, &records) {
                g.undo(changes);
                return Err(HeartbeatError {
                    code: e.code,
                    message: e.message,
                });
            }
            return reply;
        }
        // Joining, leaving or a new group: the group is copied first.
        let before = st.consumer.get(group).cloned();
        let g = st
            .consumer
            .entry(group.to_string())
            .or_insert_with(|| ConsumerGroup::new(group, now));
        let reply = g.heartbeat(hb, &topics, &cfg, now, &mut || {
            uuid::Uuid::new_v4().to_string()
        });
        // Persist what changed; answer only once it is in the log.
        let old = before
            .as_ref()
            .map(consumer_group_records::consumer_group_records)
            .unwrap_or_default();
        let records = consumer_group_records::diff_records(
            &old,
            &consumer_group_records::consumer_group_records(g),
        );
        if let Err(e) = self.append(group, &records) {
            match before {
                Some(b) => st.consumer.insert(group.to_string(), b),
                None => st.consumer.remove(group),
            };
            return Err(HeartbeatError {
                code: e.code,
                message: e.message,
            });
        }
        reply
    }
}

impl GroupCoordinator {
    /// Every topic a KIP-848 subscription may resolve to (see
    /// `topics_of`), built once per metadata view.
    pub fn subscribable_topics(&self) -> Arc<Topics> {
        let image = self.ctx.metadata.image();
        let cached = self.topics.read().expect("topics cache lock").clone();
        if let Some((view, topics)) = &cached {
            if Arc::ptr_eq(view, &image) {
                return topics.clone();
            }
        }
        let built = topics_of(&image);
        let topics = match cached {
            Some((_, old)) if *old == built => old,
            _ => Arc::new(built),
        };
        *self.topics.write().expect("topics cache lock") = Some((image, topics.clone()));
        topics
    }

    /// The topics of [`Self::subscribable_topics`] that `visible` lets the
    /// member see: the same `Arc` when it sees them all.
    fn visible_topics(&self, visible: &dyn Fn(&str) -> bool) -> Arc<Topics> {
        let all = self.subscribable_topics();
        if all.keys().all(|t| visible(t)) {
            return all;
        }
        Arc::new(
            all.iter()
                .filter(|(t, _)| visible(t))
                .map(|(t, v)| (t.clone(), *v))
                .collect(),
        )
    }
}

/// Topics consumer groups may subscribe to: name → (id, partitions).
/// Every topic, internal ones included, as KIP-848 subscriptions resolve
/// against them (Kafka resolves names and regular expressions over the
/// whole metadata image).
fn topics_of(image: &ClusterView) -> Topics {
    image
        .topics
        .values()
        .map(|t| (t.name.clone(), (t.id, t.partitions.len() as i32)))
        .collect()
}
