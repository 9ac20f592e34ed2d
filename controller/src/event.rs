//! Events: everything that can happen to the controller. Each is handled
//! by [`crate::ControllerCore::handle`] together with the current time.

use std::collections::BTreeMap;

use crate::error::ControllerError;
use crate::model::{BrokerId, PartitionState, TopicId, TopicPartition};

/// The [`Event`] and [`Reply`] enums: the variants written out here, and
/// one of each for every entry of the table in [`crate::requests::table`].
macro_rules! define_events {
    ($(
        $(#[$doc:meta])*
        $name:ident => $event:ident {
            $( $(#[$field_doc:meta])* $field:ident : $ty:ty ),* $(,)?
        } handler $handler:ident
        wire $wire:tt
        reply $reply:ident { $( $reply_field:ident : $reply_ty:ty ),* $(,)? } -> $output:ty;
    )*) => {
        /// Something the controller must react to. The requests (answered
        /// with a [`Reply`]) are declared in [`crate::requests`].
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Event {
            /// A broker is known to be gone (process exit, pod deleted).
            BrokerLost { broker: BrokerId },
            /// `CreateTopics` (or auto-creation, or a Topic resource appeared).
            CreateTopic(NewTopic),
            /// A partition leader proposes a new ISR (Kafka's `AlterPartition`).
            AlterPartition(AlterPartitionRequest),
            /// Several ISR proposals in one batch: one commit, one reply
            /// ([`Reply::AlterPartitions`]) with a result per proposal.
            AlterPartitions(Vec<AlterPartitionRequest>),
            /// `ElectLeaders` for the given partitions: every election is
            /// committed as one batch and answered with one
            /// [`Reply::ElectLeaders`].
            ElectLeaders {
                election: ElectionType,
                partitions: Vec<TopicPartition>,
            },
            /// Time passed: expire broker sessions, rebalance leaders.
            Tick,
            $(
                $(#[$doc])*
                #[doc = concat!("\n\nThe typed request: [`crate::requests::", stringify!($name), "`].")]
                $event { $( $(#[$field_doc])* $field: $ty, )* },
            )*
        }

        impl Event {
            /// The event's name in logs (`BrokerLost`, `CreateTopic`, ...).
            pub fn name(&self) -> &'static str {
                match self {
                    Event::BrokerLost { .. } => "BrokerLost",
                    Event::CreateTopic(_) => "CreateTopic",
                    Event::AlterPartition(_) => "AlterPartition",
                    Event::AlterPartitions(_) => "AlterPartitions",
                    Event::ElectLeaders { .. } => "ElectLeaders",
                    Event::Tick => "Tick",
                    $( Event::$event { .. } => stringify!($event), )*
                }
            }
        }

        /// Answers to request events.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Reply {
            CreateTopic {
                topic: String,
                result: Result<TopicId, ControllerError>,
            },
            /// The result of each proposal of an `AlterPartitions` batch, in order
            /// (each a [`Reply::AlterPartition`]).
            AlterPartitions(Vec<Reply>),
            /// The partition state after the proposal (for the leader to adopt).
            AlterPartition {
                broker: BrokerId,
                topic: String,
                partition: u32,
                result: Result<PartitionState, ControllerError>,
            },
            /// The result of each partition of an `ElectLeaders` event, in order
            /// (each a [`Reply::ElectLeader`]): one reply, one commit for all.
            ElectLeaders(Vec<Reply>),
            /// The new leader.
            ElectLeader {
                topic: String,
                partition: u32,
                result: Result<BrokerId, ControllerError>,
            },
            $(
                #[doc = concat!("The answer to [`Event::", stringify!($event), "`].")]
                $reply {
                    $( $reply_field: $reply_ty, )*
                    result: Result<$output, ControllerError>,
                },
            )*
        }
    };
}

crate::requests::table::with_requests!(define_events);

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    pub name: String,
    /// Supplied by the caller (random UUID), never [`TopicId::ZERO`].
    pub topic_id: TopicId,
    /// Ignored when `assignment` is given.
    pub partitions: u32,
    /// Ignored when `assignment` is given.
    pub replication_factor: u16,
    pub configs: BTreeMap<String, String>,
    /// Explicit replicas per partition, preferred leader first.
    pub assignment: Option<Vec<Vec<BrokerId>>>,
    /// Only check the request (`CreateTopics` `validate_only`).
    pub validate_only: bool,
}

impl NewTopic {
    /// A topic with automatic placement and no configs.
    pub fn new(
        name: impl Into<String>,
        topic_id: TopicId,
        partitions: u32,
        replication_factor: u16,
    ) -> Self {
        NewTopic {
            name: name.into(),
            topic_id,
            partitions,
            replication_factor,
            configs: BTreeMap::new(),
            assignment: None,
            validate_only: false,
        }
    }

    /// Adds a topic config.
    pub fn with_config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.configs.insert(key.into(), value.into());
        self
    }
}

/// A leader's ISR proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartitionRequest {
    /// The proposing broker (must be the leader).
    pub broker: BrokerId,
    pub broker_epoch: u64,
    pub topic: String,
    /// The id the leader knows the topic by; guards against a topic that
    /// was deleted and re-created under the same name.
    pub topic_id: TopicId,
    pub partition: u32,
    /// The leader epoch the leader is at.
    pub leader_epoch: i32,
    /// The partition epoch the proposal is based on.
    pub partition_epoch: i32,
    pub new_isr: Vec<BrokerId>,
    /// The broker epoch each member joining the ISR fetched with (KIP-841).
    /// A member registered since with a newer epoch has restarted, maybe
    /// with an empty disk, and is refused. Members not listed are not checked.
    pub new_isr_broker_epochs: BTreeMap<BrokerId, u64>,
}

/// Kafka's `ElectLeaders` election type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionType {
    /// Move leadership to the preferred replica if it is in sync.
    Preferred,
    /// Elect a leader for an offline partition, out of sync if need be.
    Unclean,
}
