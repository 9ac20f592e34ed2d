//! The narrow interface a coordinator has to the broker: the partitions it
//! appends to and reads, the metadata it places keys with, who this broker
//! is, a way to create its internal topic and one to run background tasks
//! that stop with the broker.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};

use kafka_protocol::error::ResponseError;

use tokio::task::JoinHandle;

use crate::error::ApiError;
use crate::inter_broker::InterBrokerSecurity;
use crate::metadata::{MetadataCache, TopicView};
use crate::replica_manager::ReplicaManager;

/// Creates topics as an administrator would (the broker: its configs
/// checked, the controller places it).
pub trait TopicCreator: Send + Sync {
    fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<TopicView>, ApiError>;
}

/// What a coordinator needs from the broker, and nothing else.
pub struct CoordinatorContext {
    /// The partitions this broker hosts: appends and local reads.
    pub replicas: Arc<ReplicaManager>,
    /// The cluster's metadata: topics, brokers, producer ids.
    pub metadata: Arc<MetadataCache>,
    /// This broker's `node.id`.
    pub node_id: i32,
    /// `replica.lag.time.max.ms`: a leader no follower fetched from for
    /// that long may have been replaced.
    pub replica_lag_time_max_ms: i64,
    /// How to reach other brokers (transaction markers, verification).
    pub inter_broker_security: InterBrokerSecurity,
    topics: Weak<dyn TopicCreator>,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl CoordinatorContext {
    /// A context whose background tasks join `tasks` (the broker aborts
    /// them when it stops).
    pub fn new(
        replicas: Arc<ReplicaManager>,
        metadata: Arc<MetadataCache>,
        node_id: i32,
        replica_lag_time_max_ms: i64,
        inter_broker_security: InterBrokerSecurity,
        topics: Weak<dyn TopicCreator>,
        tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
    ) -> Self {
        Self {
            replicas,
            metadata,
            node_id,
            replica_lag_time_max_ms,
            inter_broker_security,
            topics,
            tasks,
        }
    }

    /// Creates a topic (see [`TopicCreator`]); `COORDINATOR_NOT_AVAILABLE`
    /// once the broker is gone.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<TopicView>, ApiError> {
        let Some(topics) = self.topics.upgrade() else {
            return Err(ApiError::new(
                ResponseError::CoordinatorNotAvailable,
                "the broker has stopped",
            ));
        };
        topics.create_topic(name, partitions, replication_factor, configs)
    }

    /// Runs `task` in the background until it ends or the broker stops.
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let handle = tokio::spawn(task);
        let mut tasks = self.tasks.lock().expect("tasks lock");
        // Finished ones go: a coordinator spawns one per parked answer or
        // closed share session, and the list would only grow.
        tasks.retain(|t| !t.is_finished());
        tasks.push(handle);
    }
}

/// A coordinator that holds state of open transactions in its own
/// partitions (the group coordinator's transactional offsets): told when a
/// transaction's marker has been written to partition `partition` of its
/// topic at `at` (leader epoch, offset after the marker).
pub trait TxnMarkerListener: Send + Sync {
    fn on_txn_marker(&self, partition: i32, producer_id: i64, commit: bool, at: (i32, i64));
}
