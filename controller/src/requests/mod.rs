//! The control-plane requests, declared once. Each entry of the table in
//! `requests/table.rs` names a request, its fields, its handler, its wire form, its
//! answer and the output a caller gets; from that one entry come
//!
//! * the request's [`Event`] variant and its [`Reply`] variant
//!   (`define_events!` in [`crate::event`]),
//! * a typed request (a struct of the same fields, here) that converts into
//!   its event and knows how to pick its output from the replies
//!   ([`ControlRequest`]), so a caller writes
//!   `control.call(requests::Heartbeat { .. })` ([`crate::Call`]) and gets
//!   a `Result<(), _>`, not a closure matching on [`Reply`],
//! * the controller core's match arm, which calls the handler with the
//!   event's fields (`define_dispatch!` in `core/mod.rs`),
//! * its protobuf conversion (`define_wire!` in `rpc/request_wire.rs`):
//!   field by field for a `derived` request, by output type for every reply.
//!
//! Adding a request whose fields convert by type touches three files:
//! its message and `request::Kind` member in `control.proto` (a new field
//! number; numbers never change), its entry in `table.rs`, and its handler
//! in `core/` (`on_x`, answering with `self.reply(Reply::X { .. })`).
//! Callers then send it with `control.call(requests::X { .. })`. A field of
//! a new type needs its `Wire` (`rpc/field_wire.rs`, or the `*_wire.rs` of
//! its concept); a new output type its `WireOutput` (and a `Reply.result`
//! member) in `rpc/request_wire.rs`. A message whose fields are named
//! otherwise than the event's is written as a pattern in the entry
//! (`wire [Kind derived { name: topic }]`, `table.rs`).
//!
//! Requests whose event or reply has another shape (a topic to create,
//! whose reply does not carry its id; ISR proposals and batched elections,
//! answered with a reply per item) are written out below the table; they
//! implement [`ControlRequest`] all the same, and the core and `rpc/wire.rs`
//! (`rpc/partition_wire.rs`) convert and handle them by hand. Why each is
//! outside the table: `table.rs`.

use crate::event::{AlterPartitionRequest, ElectionType, NewTopic};
use crate::model::{PartitionState, TopicId, TopicPartition};
use crate::{ControllerError, Event, Reply};

/// A request to the controller: converts into its [`Event`] and picks its
/// output out of the controller's replies to that event.
pub trait ControlRequest: Into<Event> {
    /// What the caller gets when the controller accepts the request.
    type Output;
    /// This request's answer among `reply` (`None`: not it).
    fn output(reply: Reply) -> Option<Result<Self::Output, ControllerError>>;
}

pub(crate) mod table;

use table::with_requests;

/// The typed request of every entry of the table.
macro_rules! define_requests {
    ($(
        $(#[$doc:meta])*
        $name:ident => $event:ident {
            $( $(#[$field_doc:meta])* $field:ident : $ty:ty ),* $(,)?
        } handler $handler:ident
        wire $wire:tt
        reply $reply:ident { $( $reply_field:ident : $reply_ty:ty ),* $(,)? } -> $output:ty;
    )*) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone, PartialEq, Eq)]
            pub struct $name {
                $( $(#[$field_doc])* pub $field: $ty, )*
            }

            impl From<$name> for Event {
                fn from(request: $name) -> Event {
                    let $name { $($field),* } = request;
                    Event::$event { $($field),* }
                }
            }

            impl ControlRequest for $name {
                type Output = $output;
                fn output(reply: Reply) -> Option<Result<$output, ControllerError>> {
                    match reply {
                        Reply::$reply { result, .. } => Some(result),
                        _ => None,
                    }
                }
            }
        )*
    };
}

with_requests!(define_requests);

/// `CreateTopics` (or auto-creation, or a Topic resource appeared);
/// answered with the topic's id.
impl From<NewTopic> for Event {
    fn from(topic: NewTopic) -> Event {
        Event::CreateTopic(topic)
    }
}

impl ControlRequest for NewTopic {
    type Output = TopicId;
    fn output(reply: Reply) -> Option<Result<TopicId, ControllerError>> {
        match reply {
            Reply::CreateTopic { result, .. } => Some(result),
            _ => None,
        }
    }
}

/// A leader's ISR proposal, answered with the partition's state after it.
impl From<AlterPartitionRequest> for Event {
    fn from(request: AlterPartitionRequest) -> Event {
        Event::AlterPartition(request)
    }
}

impl ControlRequest for AlterPartitionRequest {
    type Output = PartitionState;
    fn output(reply: Reply) -> Option<Result<PartitionState, ControllerError>> {
        match reply {
            Reply::AlterPartition { result, .. } => Some(result),
            _ => None,
        }
    }
}

/// Several ISR proposals in one batch: one commit, one reply with a
/// [`Reply::AlterPartition`] per proposal, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartitions(pub Vec<AlterPartitionRequest>);

impl From<AlterPartitions> for Event {
    fn from(batch: AlterPartitions) -> Event {
        Event::AlterPartitions(batch.0)
    }
}

impl ControlRequest for AlterPartitions {
    type Output = Vec<Reply>;
    fn output(reply: Reply) -> Option<Result<Vec<Reply>, ControllerError>> {
        match reply {
            Reply::AlterPartitions(replies) => Some(Ok(replies)),
            _ => None,
        }
    }
}

/// `ElectLeaders` for the given partitions: every election is committed
/// as one batch and answered with a [`Reply::ElectLeader`] per partition,
/// in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectLeaders {
    pub election: ElectionType,
    pub partitions: Vec<TopicPartition>,
}

impl From<ElectLeaders> for Event {
    fn from(request: ElectLeaders) -> Event {
        Event::ElectLeaders {
            election: request.election,
            partitions: request.partitions,
        }
    }
}

impl ControlRequest for ElectLeaders {
    type Output = Vec<Reply>;
    fn output(reply: Reply) -> Option<Result<Vec<Reply>, ControllerError>> {
        match reply {
            Reply::ElectLeaders(replies) => Some(Ok(replies)),
            _ => None,
        }
    }
}
