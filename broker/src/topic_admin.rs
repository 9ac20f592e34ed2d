//! Topic administration on a broker: create (explicitly or on first use),
//! delete. The controller places and records; the broker logs it.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use tracing::info;

use crate::broker::Broker;
use crate::coordinator_runtime::TopicCreator;
use crate::error::ApiError;
use crate::metadata::TopicView;

impl Broker {
    /// Creates a topic; the controller places it and tells the replicas.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<TopicView>, ApiError> {
        self.create_topic_as(name, partitions, replication_factor, configs, None, false)?
            .ok_or_else(|| {
                ApiError::new(ResponseError::UnknownTopicOrPartition, "topic not created")
            })
    }

    /// Creates a topic, on explicit replica lists when `assignment` is given;
    /// with `validate_only` only checks that it could be (`None`).
    pub fn create_topic_as(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
        assignment: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> Result<Option<Arc<TopicView>>, ApiError> {
        self.effective_config()
            .topic_log_config(&configs)
            .map_err(|e| ApiError::new(ResponseError::InvalidConfig, e.to_string()))?;
        let topic = self.metadata.create_topic_as(
            name,
            partitions,
            replication_factor,
            configs,
            assignment,
            validate_only,
        )?;
        if let Some(t) = &topic {
            info!(
                topic = name,
                partitions = t.partitions.len(),
                replication_factor = t.replication_factor(),
                "topic created"
            );
        }
        Ok(topic)
    }

    /// The replication factor of auto-created topics:
    /// `default.replication.factor`, at most the number of live brokers.
    pub fn auto_replication_factor(&self) -> i16 {
        let live = self.metadata.image().live_brokers().count().max(1) as i16;
        self.config.default_replication_factor.clamp(1, live)
    }

    /// Auto-creates `name` with the broker defaults when allowed; returns the
    /// topic if it exists afterwards.
    pub fn auto_create(&self, name: &str) -> Result<Arc<TopicView>, ApiError> {
        if let Some(t) = self.metadata.topic(name) {
            return Ok(t);
        }
        // The coordinators' topics are made as they make them (Kafka's
        // AutoTopicCreationManager), never with the defaults of user topics.
        if name == crate::metadata::CONSUMER_OFFSETS {
            return self.groups.offsets_topic();
        }
        if name == crate::txn::TRANSACTION_STATE {
            return self.txns.state_topic();
        }
        if !self.config.auto_create_topics_enable {
            return Err(ApiError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("topic '{name}' does not exist and auto.create.topics.enable is false"),
            ));
        }
        match self.create_topic(
            name,
            self.config.num_partitions,
            self.auto_replication_factor(),
            BTreeMap::new(),
        ) {
            Err(e) if e.code == ResponseError::TopicAlreadyExists => {
                self.metadata.topic(name).ok_or_else(|| {
                    ApiError::new(ResponseError::UnknownTopicOrPartition, "topic vanished")
                })
            }
            other => other,
        }
    }

    /// Deletes a topic: metadata first, then its data.
    pub fn delete_topic(&self, name: &str) -> Result<Arc<TopicView>, ApiError> {
        let t = self.metadata.delete_topic(name)?;
        self.replicas.delete_topic(name);
        let tiered = t
            .configs
            .get(skein_controller::topic_config::keys::REMOTE_STORAGE_ENABLE)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        if let (true, Some(remote)) = (tiered, &self.remote) {
            remote.delete_topic(name, t.id, t.partitions.len() as i32);
        }
        info!(topic = name, "topic deleted");
        Ok(t)
    }
}

/// The coordinators create their internal topics as any topic is created.
impl TopicCreator for Broker {
    fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<TopicView>, ApiError> {
        Broker::create_topic(self, name, partitions, replication_factor, configs)
    }
}
