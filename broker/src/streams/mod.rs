//! Streams groups (KIP-1071). The rules followed:
//! docs/design/streams-groups-kafka-4.4.md.
//!
//! - `model`: the group, its members and topology;
//! - `heartbeat`: a StreamsGroupHeartbeat and the checks needing no group;
//! - `group`: the heartbeat's state machine over one group;
//! - `topology`: the topology checked against the cluster;
//! - `assignor`: Kafka's `sticky` task assignor;
//! - `reconcile`: how a member moves to its target (revoke, then grant
//!   what other members released);
//! - `records`: the group as records of `__consumer_offsets`.

pub mod assignor;
pub mod group;
pub mod heartbeat;
pub mod model;
pub mod reconcile;
pub mod records;
pub mod settings;
pub mod topology;
