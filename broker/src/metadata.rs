//! Cluster metadata as this broker knows it: brokers, topics (ids,
//! partitions, replica assignment, leaders, configs), the cluster id, and the
//! requests a broker makes to the controller (register, heartbeat, topic
//! admin, ISR changes, producer-id blocks).
//!
//! The controller is a [`skein_controller::ControllerService`]: a single
//! broker runs its own (Kafka's combined mode, metadata log in
//! `<data-dir>/cluster-metadata/`); brokers of an in-process test
//! cluster share one; brokers of a multi-process cluster reach it through
//! [`crate::remote_controller::RemoteController`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use kafka_protocol::error::ResponseError;
use skein_controller::requests as req;
use skein_controller::{
    AlterPartitionRequest, Call, ControlPlane, ControlRequest, ControllerError, DirectoryId,
    ElectionType, Event, NewTopic, PartitionState, Reply, TopicId,
};
use uuid::Uuid;

use crate::error::ApiError;
use crate::partition::IsrProposal;

pub use skein_controller::{
    BrokerView, ClusterView, PartitionHealth, PartitionView, TopicView, CONSUMER_OFFSETS,
};

/// Sends a typed request to the controller and returns its output, with
/// the controller's errors as Kafka's. A controller in this process
/// applies the event's instructions to this broker's logs before it answers
/// (a CreateTopics of thousands of partitions creates thousands of
/// directories), so the call leaves the async runtime's worker free.
fn call<R: ControlRequest>(
    control: &(impl ControlPlane + ?Sized),
    request: R,
) -> Result<R::Output, ApiError> {
    if control.is_local() {
        return Ok(crate::system::blocking(|| control.call(request))?);
    }
    Ok(control.call(request)?)
}

/// The per-partition results of a batch reply, one for each of `n` items
/// in order; an item the controller did not answer is an error.
fn per_partition<T>(
    replies: Vec<Reply>,
    n: usize,
    pick: impl Fn(Reply) -> Option<Result<T, ControllerError>>,
) -> Vec<Result<T, ApiError>> {
    let no_answer = || {
        ApiError::new(
            ResponseError::UnknownServerError,
            "no answer for this partition".to_string(),
        )
    };
    let mut results: Vec<Result<T, ApiError>> = replies
        .into_iter()
        .map(|r| pick(r).map_or_else(|| Err(no_answer()), |r| r.map_err(ApiError::from)))
        .collect();
    results.resize_with(n, || Err(no_answer()));
    results
}

/// This broker's handle on the cluster metadata and the controller.
pub struct MetadataCache {
    node_id: i32,
    controller: Arc<dyn ControlPlane>,
    broker_epoch: AtomicU64,
    /// What the next registration says of the previous incarnation: the
    /// epoch of a clean stop (from the marker) or of this running process's
    /// last registration; `None` after an unclean stop.
    previous_epoch: Mutex<Option<u64>>,
    /// Next producer id to hand out and the end (exclusive) of the block.
    producer_ids: Mutex<(i64, i64)>,
    /// When the controller last answered a registration or heartbeat
    /// (Unix ms; 0: never), for `/readyz`.
    last_contact_ms: std::sync::atomic::AtomicI64,
}

impl MetadataCache {
    pub fn new(node_id: i32, controller: Arc<dyn ControlPlane>) -> Self {
        Self {
            node_id,
            controller,
            broker_epoch: AtomicU64::new(0),
            previous_epoch: Mutex::new(None),
            producer_ids: Mutex::new((0, 0)),
            last_contact_ms: std::sync::atomic::AtomicI64::new(0),
        }
    }

    /// The epoch this broker held when it last stopped cleanly (read from
    /// the clean-shutdown marker at start), sent with the first registration.
    pub fn set_clean_shutdown_epoch(&self, epoch: Option<u64>) {
        *self.previous_epoch.lock().expect("previous epoch lock") = epoch;
    }

    pub fn controller(&self) -> &Arc<dyn ControlPlane> {
        &self.controller
    }

    /// Registers this broker; the controller fences its previous
    /// incarnation and makes it leader or follower of its partitions.
    pub fn register(
        &self,
        host: &str,
        port: u16,
        rack: Option<String>,
        directory_id: DirectoryId,
        endpoints: Vec<skein_controller::Endpoint>,
    ) -> Result<u64, ApiError> {
        let epoch = call(
            self.controller.as_ref(),
            req::Register {
                broker: self.node_id,
                host: host.to_string(),
                port,
                rack,
                directory_id: Some(directory_id),
                previous_broker_epoch: *self.previous_epoch.lock().expect("previous epoch lock"),
                endpoints,
                software: skein_controller::BrokerSoftware {
                    version: Some(env!("CARGO_PKG_VERSION").to_string()),
                    features: skein_controller::features::supported(),
                },
            },
        )?;
        self.broker_epoch.store(epoch, Ordering::Release);
        self.touch();
        // This process keeps what it wrote: registering again (after being
        // fenced, or with a new controller) is no unclean stop.
        *self.previous_epoch.lock().expect("previous epoch lock") = Some(epoch);
        Ok(epoch)
    }

    /// Blocks until the controller's instructions received so far (the
    /// roles a registration hands out) have been applied.
    pub fn wait_applied(&self) {
        self.controller.wait_applied();
    }

    pub fn broker_epoch(&self) -> u64 {
        self.controller
            .broker_epoch()
            .unwrap_or_else(|| self.broker_epoch.load(Ordering::Acquire))
    }

    /// Tells the controller this broker is alive.
    pub fn heartbeat(&self) -> Result<(), ApiError> {
        call(
            self.controller.as_ref(),
            req::Heartbeat {
                broker: self.node_id,
                broker_epoch: self.broker_epoch(),
            },
        )?;
        self.touch();
        Ok(())
    }

    fn touch(&self) {
        self.last_contact_ms
            .store(crate::system::now_ms(), Ordering::Release);
    }

    /// When the controller last accepted a registration or heartbeat of
    /// this broker (Unix ms; 0: never).
    pub fn last_contact_ms(&self) -> i64 {
        self.last_contact_ms.load(Ordering::Acquire)
    }

    /// Asks the controller to move leadership off this broker; `Ok` once it
    /// leads nothing.
    pub fn controlled_shutdown(&self) -> Result<(), ApiError> {
        call(
            self.controller.as_ref(),
            req::ControlledShutdown {
                broker: self.node_id,
                broker_epoch: self.broker_epoch(),
            },
        )
    }

    /// Tells the controller this broker is gone (it is about to exit).
    pub fn leave(&self) {
        let _ = self.controller.handle(Event::BrokerLost {
            broker: self.node_id,
        });
    }

    /// Reports what this broker's replicas of leaderless partitions hold,
    /// for the controller's unclean recovery.
    pub fn report_replica_logs(
        &self,
        logs: Vec<skein_controller::unclean_recovery::ReplicaLog>,
    ) -> Result<(), ApiError> {
        call(
            self.controller.as_ref(),
            req::ReportReplicaLogs {
                broker: self.node_id,
                broker_epoch: self.broker_epoch(),
                logs,
            },
        )
    }

    /// A leader's ISR proposals (AlterPartition), several in one round trip and one controller commit;
    /// a result for each, in order.
    pub fn alter_partitions(
        &self,
        proposals: &[IsrProposal],
    ) -> Result<Vec<Result<PartitionState, ApiError>>, ApiError> {
        let batch = proposals.iter().map(|p| self.alter_request(p)).collect();
        let replies = call(self.controller.as_ref(), req::AlterPartitions(batch))?;
        Ok(per_partition(
            replies,
            proposals.len(),
            AlterPartitionRequest::output,
        ))
    }

    fn alter_request(&self, p: &IsrProposal) -> AlterPartitionRequest {
        AlterPartitionRequest {
            broker: self.node_id,
            broker_epoch: self.broker_epoch(),
            topic: p.topic.clone(),
            topic_id: TopicId(p.topic_id.as_u128()),
            partition: p.partition as u32,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            new_isr: p.new_isr.clone(),
            new_isr_broker_epochs: p.new_isr_broker_epochs.clone(),
        }
    }

    /// A consistent snapshot of the whole image.
    pub fn image(&self) -> Arc<ClusterView> {
        self.controller.view()
    }

    /// The finalized `transaction.version` (0 when the controller does not
    /// know it: it runs a release from before it).
    pub fn transaction_version(&self) -> i16 {
        use skein_controller::features::TRANSACTION_VERSION;
        self.image()
            .features
            .finalized
            .get(TRANSACTION_VERSION)
            .copied()
            .unwrap_or(0)
    }

    /// The finalized `share.version`: share groups are served from 1.
    pub fn share_version(&self) -> i16 {
        use skein_controller::features::SHARE_VERSION;
        self.image()
            .features
            .finalized
            .get(SHARE_VERSION)
            .copied()
            .unwrap_or(0)
    }

    /// The finalized `streams.version`: streams groups are served from 1.
    pub fn streams_version(&self) -> i16 {
        use skein_controller::features::STREAMS_VERSION;
        self.image()
            .features
            .finalized
            .get(STREAMS_VERSION)
            .copied()
            .unwrap_or(0)
    }

    /// The topic named `name` (shared with the published view, not copied).
    pub fn topic(&self, name: &str) -> Option<Arc<TopicView>> {
        self.image().topics.get(name).cloned()
    }

    pub fn topic_by_id(&self, id: Uuid) -> Option<Arc<TopicView>> {
        self.image().topic_by_id(id).cloned()
    }

    fn unknown(name: &str) -> ApiError {
        ApiError::new(
            ResponseError::UnknownTopicOrPartition,
            format!("topic '{name}' does not exist"),
        )
    }

    /// Creates a topic placed by the controller.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<TopicView>, ApiError> {
        self.create_topic_as(name, partitions, replication_factor, configs, None, false)?
            .ok_or_else(|| Self::unknown(name))
    }

    /// Creates a topic: placed by the controller, or on `assignment`'s
    /// replica lists (preferred leader first) as CreateTopics gives them.
    /// With `validate_only` the controller checks everything a creation
    /// would (names, configs, placement on the live brokers) and creates
    /// nothing; `None` is returned then.
    pub fn create_topic_as(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
        assignment: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> Result<Option<Arc<TopicView>>, ApiError> {
        validate_topic_name(name)?;
        if assignment.is_none() && partitions < 1 {
            return Err(ApiError::new(
                ResponseError::InvalidPartitions,
                format!("number of partitions must be at least 1, got {partitions}"),
            ));
        }
        if assignment.is_none() && replication_factor < 1 {
            return Err(ApiError::new(
                ResponseError::InvalidReplicationFactor,
                format!("replication factor must be at least 1, got {replication_factor}"),
            ));
        }
        if let Some(other) = self.image().topics.keys().find(|t| collides(t, name)) {
            return Err(ApiError::new(
                ResponseError::InvalidTopicException,
                format!("topic '{name}' collides with existing topic '{other}' ('.' and '_' are interchangeable in metric names)"),
            ));
        }
        let mut t = NewTopic::new(
            name,
            TopicId(Uuid::new_v4().as_u128()),
            partitions.max(0) as u32,
            replication_factor.max(0) as u16,
        );
        t.configs = configs;
        t.assignment = assignment;
        t.validate_only = validate_only;
        call(self.controller.as_ref(), t)?;
        if validate_only {
            return Ok(None);
        }
        self.topic(name)
            .ok_or_else(|| Self::unknown(name))
            .map(Some)
    }
    /// Removes a topic from the image (replicas delete their logs).
    pub fn delete_topic(&self, name: &str) -> Result<Arc<TopicView>, ApiError> {
        let meta = self.topic(name).ok_or_else(|| Self::unknown(name))?;
        call(
            self.controller.as_ref(),
            req::DeleteTopic {
                topic: name.to_string(),
            },
        )?;
        Ok(meta)
    }

    /// Grows a topic to `count` partitions, placed by the controller or on
    /// `assignment`'s replica lists (one per new partition).
    pub fn create_partitions(
        &self,
        name: &str,
        count: i32,
        assignment: Option<Vec<Vec<i32>>>,
    ) -> Result<Arc<TopicView>, ApiError> {
        let current = self
            .topic(name)
            .ok_or_else(|| Self::unknown(name))?
            .partitions
            .len() as i32;
        if count <= current {
            return Err(ApiError::new(
                ResponseError::InvalidPartitions,
                format!("topic '{name}' has {current} partitions; the count can only grow, {count} asked"),
            ));
        }
        call(
            self.controller.as_ref(),
            req::CreatePartitions {
                topic: name.to_string(),
                count: count as u32,
                assignment,
            },
        )?;
        self.topic(name).ok_or_else(|| Self::unknown(name))
    }

    /// Replaces a topic's configs.
    pub fn set_topic_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<TopicView>, ApiError> {
        if self.topic(name).is_none() {
            return Err(Self::unknown(name));
        }
        call(
            self.controller.as_ref(),
            req::AlterConfigs {
                topic: name.to_string(),
                configs,
            },
        )?;
        self.topic(name).ok_or_else(|| Self::unknown(name))
    }

    /// `AlterClientQuotas`, checked changes only: applied whole.
    pub fn alter_client_quotas(
        &self,
        changes: Vec<skein_controller::quotas::QuotaChange>,
    ) -> Result<(), ApiError> {
        call(self.controller.as_ref(), req::AlterClientQuotas { changes })
    }

    /// Finalizes `feature` at `level` (UpdateFeatures); the level it was at.
    pub fn update_feature(
        &self,
        feature: &str,
        level: i16,
        validate_only: bool,
    ) -> Result<i16, ApiError> {
        call(
            self.controller.as_ref(),
            req::UpdateFeature {
                feature: feature.to_string(),
                level,
                validate_only,
            },
        )
    }

    /// Dynamic broker configs, checked changes only: applied whole.
    pub fn alter_broker_configs(
        &self,
        changes: Vec<skein_controller::broker_configs::BrokerConfigChange>,
    ) -> Result<(), ApiError> {
        call(
            self.controller.as_ref(),
            req::AlterBrokerConfigs { changes },
        )
    }

    /// `CreateAcls`, checked bindings only: applied whole.
    pub fn create_acls(&self, bindings: Vec<skein_controller::AclBinding>) -> Result<(), ApiError> {
        call(self.controller.as_ref(), req::CreateAcls { bindings })
    }

    /// `DeleteAcls`: per filter, the bindings it matched (all deleted).
    pub fn delete_acls(
        &self,
        filters: Vec<skein_controller::AclFilter>,
    ) -> Result<Vec<Vec<skein_controller::AclBinding>>, ApiError> {
        call(self.controller.as_ref(), req::DeleteAcls { filters })
    }

    /// `AlterUserScramCredentials`, checked entries only: applied whole.
    pub fn alter_scram_credentials(
        &self,
        upsertions: Vec<skein_controller::ScramUpsertion>,
        deletions: Vec<(String, skein_controller::ScramMechanism)>,
    ) -> Result<(), ApiError> {
        call(
            self.controller.as_ref(),
            req::AlterScramCredentials {
                upsertions,
                deletions,
            },
        )
    }

    /// Replaces a client-metrics subscription's or a group's configs (an
    /// empty set removes them).
    pub fn alter_resource_configs(
        &self,
        kind: skein_controller::resource_configs::ConfigResourceKind,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<(), ApiError> {
        call(
            self.controller.as_ref(),
            req::AlterResourceConfigs {
                kind,
                name: name.to_string(),
                configs,
            },
        )
    }

    /// Stores a new delegation token.
    pub fn create_delegation_token(
        &self,
        token: skein_controller::delegation_tokens::DelegationToken,
    ) -> Result<(), ApiError> {
        call(
            self.controller.as_ref(),
            req::CreateDelegationToken { token },
        )
    }

    /// Moves a delegation token's expiry, or removes the token (`None`).
    pub fn set_delegation_token_expiry(
        &self,
        token_id: &str,
        expiry_ms: Option<i64>,
    ) -> Result<(), ApiError> {
        call(
            self.controller.as_ref(),
            req::SetDelegationTokenExpiry {
                token_id: token_id.to_string(),
                expiry_ms,
            },
        )
    }

    /// Moves a partition to `target` replicas (preferred leader first), or
    /// cancels its running reassignment (`None`).
    pub fn reassign_partition(
        &self,
        topic: &str,
        partition: i32,
        target: Option<Vec<i32>>,
    ) -> Result<(), ApiError> {
        call(
            self.controller.as_ref(),
            req::ReassignPartition {
                topic: topic.to_string(),
                partition: partition.max(0) as u32,
                target,
                // A Kafka client sets its own throttle lists.
                throttled: false,
            },
        )
    }

    /// ElectLeaders for many partitions in one controller request and one
    /// commit: the preferred replica of each if it is in sync, or
    /// (`unclean`) any live replica of an offline partition. Returns each
    /// partition's new leader or error, in order.
    pub fn elect_leaders(
        &self,
        partitions: &[(String, u32)],
        unclean: bool,
    ) -> Result<Vec<Result<i32, ApiError>>, ApiError> {
        let replies = call(
            self.controller.as_ref(),
            req::ElectLeaders {
                election: if unclean {
                    ElectionType::Unclean
                } else {
                    ElectionType::Preferred
                },
                partitions: partitions
                    .iter()
                    .map(|(t, p)| skein_controller::TopicPartition::new(t, *p))
                    .collect(),
            },
        )?;
        Ok(per_partition(replies, partitions.len(), |r| match r {
            Reply::ElectLeader { result, .. } => Some(result),
            _ => None,
        }))
    }

    /// Hands out the next producer id from a block the controller allocated
    /// (blocks are persisted, so ids are never reused across restarts).
    pub fn allocate_producer_id(&self) -> Result<i64, ApiError> {
        {
            let mut ids = self.producer_ids.lock().expect("producer ids lock");
            if ids.0 < ids.1 {
                ids.0 += 1;
                return Ok(ids.0 - 1);
            }
        }
        let block = call(
            self.controller.as_ref(),
            req::AllocateProducerIds {
                broker: self.node_id,
                broker_epoch: self.broker_epoch(),
            },
        )?;
        let mut ids = self.producer_ids.lock().expect("producer ids lock");
        *ids = (block.first_producer_id + 1, block.last_producer_id() + 1);
        Ok(block.first_producer_id)
    }
}

/// Two topic names collide if they differ only by '.' versus '_' (Kafka rule).
fn collides(a: &str, b: &str) -> bool {
    a != b && a.replace('.', "_") == b.replace('.', "_")
}

/// Kafka's topic-name rules: 1–249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), ApiError> {
    let bad = |why: String| Err(ApiError::new(ResponseError::InvalidTopicException, why));
    if name.is_empty() {
        return bad("topic name is empty".into());
    }
    if name == "." || name == ".." {
        return bad(format!("topic name cannot be '{name}'"));
    }
    if name.len() > 249 {
        return bad(format!(
            "topic name is {} characters long; the limit is 249",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return bad(format!(
            "topic name '{name}' contains '{c}'; allowed are ASCII letters, digits, '.', '_' and '-'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A combined-mode store: its own controller, image under `dir`.
    fn open_store(dir: &std::path::Path) -> MetadataCache {
        let controller = skein_controller::ControllerService::open(
            Some(&dir.join("cluster-metadata")),
            Default::default(),
        )
        .unwrap();
        let store = MetadataCache::new(1, controller);
        store
            .register("127.0.0.1", 9092, None, DirectoryId(1), vec![])
            .unwrap();
        store
    }

    #[test]
    fn topic_names_follow_kafka_rules() {
        assert!(validate_topic_name("orders.v1_a-b").is_ok());
        for bad in ["", ".", "..", "a b", "ünï", "x/y"] {
            assert_eq!(
                validate_topic_name(bad).unwrap_err().code,
                ResponseError::InvalidTopicException,
                "{bad}"
            );
        }
        assert!(validate_topic_name(&"a".repeat(249)).is_ok());
        assert!(validate_topic_name(&"a".repeat(250)).is_err());
    }

    #[test]
    fn metadata_survives_reopen_and_rejects_duplicates() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_store(dir.path());
        let t = store.create_topic("a", 3, 1, BTreeMap::new()).unwrap();
        assert_eq!(t.partitions.len(), 3);
        assert_eq!(
            store
                .create_topic("a", 1, 1, BTreeMap::new())
                .unwrap_err()
                .code,
            ResponseError::TopicAlreadyExists
        );
        assert_eq!(
            store
                .create_topic("b", 1, 3, BTreeMap::new())
                .unwrap_err()
                .code,
            ResponseError::InvalidReplicationFactor
        );
        assert_eq!(
            store.create_partitions("a", 2, None).unwrap_err().code,
            ResponseError::InvalidPartitions
        );
        store.create_partitions("a", 5, None).unwrap();
        let pid = store.allocate_producer_id().unwrap();
        let cluster_id = store.image().cluster_id.clone();
        assert_eq!(cluster_id.len(), 22);
        drop(store);
        let store = open_store(dir.path());
        assert_eq!(store.topic("a").unwrap().partitions.len(), 5);
        // The embedded controller re-elects this broker, at a newer leader epoch.
        for (before, after) in t
            .partitions
            .iter()
            .zip(&store.topic("a").unwrap().partitions)
        {
            assert_eq!(after.leader, 1);
            assert_eq!(after.isr, vec![1]);
            assert!(after.leader_epoch > before.leader_epoch);
        }
        assert_eq!(store.topic("a").unwrap().id, t.id);
        assert_eq!(store.image().cluster_id, cluster_id);
        assert!(store.allocate_producer_id().unwrap() > pid);
    }

    #[test]
    fn colliding_names_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_store(dir.path());
        store.create_topic("a.b", 1, 1, BTreeMap::new()).unwrap();
        assert_eq!(
            store
                .create_topic("a_b", 1, 1, BTreeMap::new())
                .unwrap_err()
                .code,
            ResponseError::InvalidTopicException
        );
    }
}
