//! How a field of a request crosses the control plane, by type: the
//! conversions the requests declared `derived` (`requests/table.rs`) are
//! made of. A new field type of such a request gets its [`Wire`] here, or
//! in the `*_wire.rs` of its concept (ACLs, quotas, features, endpoints)
//! next to the conversions the view shares with it.

use std::collections::{BTreeMap, HashMap};

use super::pb;
use crate::broker_configs::BrokerConfigChange;
use crate::model::{BrokerId, DirectoryId, TopicId};
use crate::unclean_recovery::ReplicaLog;

/// A field's protobuf form.
pub trait Wire: Sized {
    /// Its type in the prost message.
    type Pb;
    fn to_pb(&self) -> Self::Pb;
    fn from_pb(pb: Self::Pb) -> Self;
}

/// Types prost carries as they are.
macro_rules! same_on_the_wire {
    ($($t:ty),*) => {$(
        impl Wire for $t {
            type Pb = $t;
            fn to_pb(&self) -> $t {
                self.clone()
            }
            fn from_pb(pb: $t) -> $t {
                pb
            }
        }
    )*};
}

same_on_the_wire!(
    bool,
    i32,
    u32,
    u64,
    i64,
    String,
    Option<String>,
    Option<u64>,
    Option<i64>
);

/// Narrower integers travel widened; a value out of range is clamped. The
/// one `i16` of a request is a feature level (`UpdateFeature`), which is
/// never negative: it is clamped to `0..=i16::MAX` as the levels of the
/// view and of the reply are.
impl Wire for i16 {
    type Pb = i32;
    fn to_pb(&self) -> i32 {
        (*self).into()
    }
    fn from_pb(pb: i32) -> i16 {
        pb.clamp(0, i16::MAX.into()) as i16
    }
}

impl Wire for u16 {
    type Pb = u32;
    fn to_pb(&self) -> u32 {
        (*self).into()
    }
    fn from_pb(pb: u32) -> u16 {
        pb.min(u16::MAX.into()) as u16
    }
}

impl<T: Wire> Wire for Vec<T> {
    type Pb = Vec<T::Pb>;
    fn to_pb(&self) -> Vec<T::Pb> {
        self.iter().map(T::to_pb).collect()
    }
    fn from_pb(pb: Vec<T::Pb>) -> Vec<T> {
        pb.into_iter().map(T::from_pb).collect()
    }
}

impl Wire for BTreeMap<String, String> {
    type Pb = HashMap<String, String>;
    fn to_pb(&self) -> HashMap<String, String> {
        self.clone().into_iter().collect()
    }
    fn from_pb(pb: HashMap<String, String>) -> Self {
        pb.into_iter().collect()
    }
}

impl Wire for ReplicaLog {
    type Pb = pb::ReplicaLog;
    fn to_pb(&self) -> pb::ReplicaLog {
        pb::ReplicaLog {
            topic: self.topic.clone(),
            partition: self.partition,
            last_leader_epoch: self.last_leader_epoch,
            log_end_offset: self.log_end_offset,
        }
    }
    fn from_pb(l: pb::ReplicaLog) -> Self {
        ReplicaLog {
            topic: l.topic,
            partition: l.partition,
            last_leader_epoch: l.last_leader_epoch,
            log_end_offset: l.log_end_offset,
        }
    }
}

impl Wire for BrokerConfigChange {
    type Pb = pb::BrokerConfigChange;
    fn to_pb(&self) -> pb::BrokerConfigChange {
        pb::BrokerConfigChange {
            resource: self.resource.clone(),
            key: self.key.clone(),
            value: self.value.clone(),
        }
    }
    fn from_pb(c: pb::BrokerConfigChange) -> Self {
        BrokerConfigChange {
            resource: c.resource,
            key: c.key,
            value: c.value,
        }
    }
}

/// A log directory's id: its 16 bytes, big-endian; none (or bytes of
/// another length) as no bytes.
impl Wire for Option<DirectoryId> {
    type Pb = Vec<u8>;
    fn to_pb(&self) -> Vec<u8> {
        self.map(|d| d.0.to_be_bytes().to_vec()).unwrap_or_default()
    }
    fn from_pb(pb: Vec<u8>) -> Self {
        <[u8; 16]>::try_from(pb.as_slice())
            .ok()
            .map(|b| DirectoryId(u128::from_be_bytes(b)))
    }
}

/// Explicit replicas per partition (`CreatePartitions`, `CreateTopic`);
/// none (the controller places them) as no lists.
impl Wire for Option<Vec<Vec<BrokerId>>> {
    type Pb = Vec<pb::ReplicaList>;
    fn to_pb(&self) -> Vec<pb::ReplicaList> {
        self.iter()
            .flatten()
            .map(|replicas| pb::ReplicaList {
                replicas: replicas.clone(),
            })
            .collect()
    }
    fn from_pb(pb: Vec<pb::ReplicaList>) -> Self {
        (!pb.is_empty()).then(|| pb.into_iter().map(|l| l.replicas).collect())
    }
}

/// A replica list that may be absent (`ReassignPartition`'s target, absent
/// to cancel): the list (empty when absent) and whether it is absent.
impl Wire for Option<Vec<BrokerId>> {
    type Pb = (Vec<BrokerId>, bool);
    fn to_pb(&self) -> (Vec<BrokerId>, bool) {
        (self.clone().unwrap_or_default(), self.is_none())
    }
    fn from_pb((list, absent): (Vec<BrokerId>, bool)) -> Self {
        (!absent).then_some(list)
    }
}

/// A UUID's 16 bytes; any other length reads as the nil UUID.
pub(super) fn uuid_from(bytes: &[u8]) -> uuid::Uuid {
    uuid::Uuid::from_slice(bytes).unwrap_or(uuid::Uuid::nil())
}

/// A topic id: its 16 bytes (a UUID); any other length reads as the nil id.
impl Wire for TopicId {
    type Pb = Vec<u8>;
    fn to_pb(&self) -> Vec<u8> {
        uuid::Uuid::from_u128(self.0).as_bytes().to_vec()
    }
    fn from_pb(pb: Vec<u8>) -> TopicId {
        TopicId(uuid_from(&pb).as_u128())
    }
}
