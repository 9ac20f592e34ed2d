//! How a field of a request crosses the control plane, by type: the
//! conversions the requests declared `derived` (`requests/table.rs`) are
//! made of. A new field type of such a request gets its [`Wire`] here.

use std::collections::{BTreeMap, HashMap};

use super::pb;
use crate::broker_configs::BrokerConfigChange;

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
    Option<u64>
);

/// Narrower integers travel widened; a value out of range is clamped.
impl Wire for i16 {
    type Pb = i32;
    fn to_pb(&self) -> i32 {
        (*self).into()
    }
    fn from_pb(pb: i32) -> i16 {
        pb.clamp(i16::MIN.into(), i16::MAX.into()) as i16
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
