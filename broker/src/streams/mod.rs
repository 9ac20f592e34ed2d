//! Streams groups (KIP-1071): the parts built so far. Not served yet:
//! StreamsGroupHeartbeat and StreamsGroupDescribe are listed as not served
//! in docs/compatibility.md until the whole protocol (topology, internal
//! topics, reconciliation, records) is in place. The rules followed:
//! docs/design/streams-groups-kafka-4.4.md.
//!
//! - `assignor`: Kafka's `sticky` task assignor;
//! - `reconcile`: how a member moves to its target (revoke, then grant
//!   what other members released).

pub mod assignor;
pub mod reconcile;
