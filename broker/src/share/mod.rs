//! Share groups (KIP-932, queues on Kafka topics), served when the
//! cluster's `share.version` is 1 or more. The rules followed:
//! docs/design/share-groups-kafka-4.4.md; the differences from Kafka:
//! docs/compatibility.md.
//!
//! - `partition`: a share-partition's delivery state (acquisition locks,
//!   delivery counts, acknowledgements, the start offset);
//! - `manager`: the share-partitions this broker leads, their sessions
//!   and lock timer (ShareFetch and ShareAcknowledge);
//! - `assignor`: Kafka's `simple` share assignor;
//! - `group`: a share group's membership (ShareGroupHeartbeat's rules;
//!   the group coordinator keeps it, `group/coordinator_share.rs`);
//! - `sessions`: share sessions (ShareFetch and ShareAcknowledge epochs);
//! - `state`: the persisted state the share coordinator keeps, and its
//!   epochs; `coordinator`: the share coordinator on
//!   `__share_group_state`; `records`: their record layouts;
//!   `persister`: how the others reach it;
//! - `metrics`: the share-group series of `/metrics`;
//! - `settings`: `group.share.*` and a group's `share.*` configs.

pub mod assignor;
pub mod coordinator;
pub mod group;
pub mod manager;
pub mod metrics;
pub mod partition;
pub mod persister;
pub mod records;
pub mod sessions;
pub mod settings;
pub mod state;
