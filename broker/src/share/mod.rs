//! Share groups (KIP-932, queues on Kafka topics): the parts built so far.
//! Not served yet: ShareGroupHeartbeat, ShareFetch and the other share APIs
//! are listed as not served in docs/compatibility.md until the whole of
//! KIP-932 (membership, share sessions, persisted state) is in place. The
//! rules followed: docs/design/share-groups-kafka-4.4.md.
//!
//! - `partition`: a share-partition's delivery state (acquisition locks,
//!   delivery counts, acknowledgements, the start offset);
//! - `assignor`: Kafka's `simple` share assignor;
//! - `group`: a share group's membership (ShareGroupHeartbeat's rules);
//! - `sessions`: share sessions (ShareFetch and ShareAcknowledge epochs);
//! - `state`: the persisted state the share coordinator keeps, and its
//!   epochs.

pub mod assignor;
pub mod group;
pub mod partition;
pub mod sessions;
pub mod state;
