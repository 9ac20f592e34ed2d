//! The wire form of the requests of `requests/table.rs`, derived from
//! their entries: the event of a request declared `[Kind derived]` (or
//! `[Kind derived { pattern }]`) goes as `request::Kind::Kind` field by
//! field ([`Wire`]), and the reply of every request carries its output by
//! type ([`WireOutput`]). A request declared `by_hand` is converted in
//! [`super::wire`].

use super::acl_wire as aw;
use super::field_wire::Wire;
use super::pb::{self, reply, request};
use crate::acls::AclBinding;
use crate::model::{BrokerId, ProducerIdBlock};
use crate::{ControllerError, Event, Reply};

/// An output's place in a reply (its error goes in the reply's code).
pub trait WireOutput: Sized {
    fn to_result(self) -> Option<reply::Result>;
    /// `None`: the reply does not carry this output.
    fn from_result(result: &Option<reply::Result>) -> Option<Self>;
}

impl WireOutput for () {
    fn to_result(self) -> Option<reply::Result> {
        None
    }
    fn from_result(_: &Option<reply::Result>) -> Option<()> {
        Some(())
    }
}

/// A broker epoch (`Register`).
impl WireOutput for u64 {
    fn to_result(self) -> Option<reply::Result> {
        Some(reply::Result::BrokerEpoch(self))
    }
    fn from_result(result: &Option<reply::Result>) -> Option<u64> {
        match result {
            Some(reply::Result::BrokerEpoch(e)) => Some(*e),
            _ => None,
        }
    }
}

/// A feature level (`UpdateFeature`).
impl WireOutput for i16 {
    fn to_result(self) -> Option<reply::Result> {
        Some(reply::Result::PreviousLevel(self.into()))
    }
    fn from_result(result: &Option<reply::Result>) -> Option<i16> {
        match result {
            Some(reply::Result::PreviousLevel(l)) => Some((*l).clamp(0, i16::MAX.into()) as i16),
            _ => None,
        }
    }
}

/// A count the operator's own requests return; not carried.
impl WireOutput for u32 {
    fn to_result(self) -> Option<reply::Result> {
        None
    }
    fn from_result(_: &Option<reply::Result>) -> Option<u32> {
        None
    }
}

impl WireOutput for ProducerIdBlock {
    fn to_result(self) -> Option<reply::Result> {
        Some(reply::Result::ProducerIds(pb::ProducerIdBlock {
            first_producer_id: self.first_producer_id,
            size: self.size,
        }))
    }
    fn from_result(result: &Option<reply::Result>) -> Option<ProducerIdBlock> {
        match result {
            Some(reply::Result::ProducerIds(b)) => Some(ProducerIdBlock {
                first_producer_id: b.first_producer_id,
                size: b.size,
            }),
            _ => None,
        }
    }
}

/// Per filter, the bindings it matched (`DeleteAcls`).
impl WireOutput for Vec<Vec<AclBinding>> {
    fn to_result(self) -> Option<reply::Result> {
        Some(reply::Result::DeletedAcls(aw::matches_to_pb(&self)))
    }
    fn from_result(result: &Option<reply::Result>) -> Option<Self> {
        match result {
            Some(reply::Result::DeletedAcls(m)) => Some(aw::matches_from_pb(m.clone())),
            _ => None,
        }
    }
}

/// The error a broker reads from a reply that failed or lacks its output.
pub fn remote_error(r: &pb::Reply) -> ControllerError {
    ControllerError::Remote {
        code: r.error_code as i16,
        message: r.error_message.clone(),
    }
}

/// Sets the message field(s) `$pb` of `$m` from the event's field `$src`
/// (the same name when none is given). The session's `broker` is not
/// sent unless a message field is named for it.
macro_rules! field_to_pb {
    ($m:ident, broker) => {};
    ($m:ident, $pb:ident) => {
        $m.$pb = Wire::to_pb($pb)
    };
    ($m:ident, $pb:ident : $src:ident) => {
        $m.$pb = Wire::to_pb($src)
    };
    ($m:ident, ($($pb:ident),+) : $src:ident) => {
        ($($m.$pb),+) = Wire::to_pb($src)
    };
}

/// Binds the event's field `$src` (the same name when none is given) to
/// the wire value of message field(s) `$pb` of `$m`; the session's `broker`
/// is never read from a message.
macro_rules! field_from_pb {
    ($m:ident, broker) => {};
    ($m:ident, $pb:ident : broker) => {};
    ($m:ident, $pb:ident) => {
        let $pb = $m.$pb;
    };
    ($m:ident, $pb:ident : $src:ident) => {
        let $src = $m.$pb;
    };
    ($m:ident, ($($pb:ident),+) : $src:ident) => {
        let $src = ($($m.$pb),+);
    };
}

/// The value of the event's field `$field` from the wire values bound by
/// `field_from_pb!`, or `$session`, the broker of the session.
macro_rules! event_field {
    (broker, $session:ident) => {
        $session
    };
    ($field:ident, $session:ident) => {
        Wire::from_pb($field)
    };
}

/// For a table entry: its wire form (`None`: not `derived`). The event's
/// fields are bound by the caller's pattern.
macro_rules! derived_to_pb {
    ([$kind:ident derived], { $($field:ident),* }) => {
        derived_to_pb!([$kind derived { $($field),* }], {})
    };
    ([$kind:ident derived { $($pb:tt $(: $src:ident)?),* $(,)? }], { $($field:ident),* }) => {{
        let mut m = pb::$kind::default();
        $( field_to_pb!(m, $pb $(: $src)?); )*
        Some(request::Kind::$kind(m))
    }};
    ($other:tt, { $($field:ident),* }) => {
        None
    };
}

/// For a `derived` request: returns its event if `$k` is it, else gives
/// the kind back.
macro_rules! derived_from_pb {
    ([$kind:ident derived], $k:ident, $session:ident, $variant:ident { $($field:ident),* }) => {
        derived_from_pb!([$kind derived { $($field),* }], $k, $session, $variant { $($field),* });
    };
    (
        [$kind:ident derived { $($pb:tt $(: $src:ident)?),* $(,)? }],
        $k:ident, $session:ident, $variant:ident { $($field:ident),* }
    ) => {
        let $k = match $k {
            request::Kind::$kind(m) => {
                $( field_from_pb!(m, $pb $(: $src)?); )*
                return Ok(Event::$variant { $($field: event_field!($field, $session)),* });
            }
            other => other,
        };
    };
    ($other:tt, $k:ident, $session:ident, $variant:ident { $($field:ident),* }) => {};
}

macro_rules! define_wire {
    ($(
        $(#[$doc:meta])*
        $name:ident => $event:ident {
            $( $(#[$field_doc:meta])* $field:ident : $ty:ty ),* $(,)?
        } handler $handler:ident
        wire $wire:tt
        reply $reply:ident { $( $reply_field:ident : $reply_ty:ty ),* $(,)? } -> $output:ty;
    )*) => {
        /// The wire form of a `derived` request (`None`: another event).
        // The session's `broker`, and the fields of requests that are not
        // `derived`, are bound and not sent.
        #[allow(unused_variables)]
        pub fn derived_event_to_pb(event: &Event) -> Option<request::Kind> {
            match event {
                $( Event::$event { $($field),* } => derived_to_pb!($wire, { $($field),* }), )*
                _ => None,
            }
        }

        /// The event of a `derived` request from `broker`, or the kind back
        /// (moved back whole: boxing it would allocate for every request).
        #[allow(clippy::result_large_err)]
        pub fn derived_event_from_pb(
            session: BrokerId,
            kind: request::Kind,
        ) -> Result<Event, request::Kind> {
            $( derived_from_pb!($wire, kind, session, $event { $($field),* }); )*
            Err(kind)
        }

        /// For a reply to a request of the table, `Ok` with its output's
        /// place in the wire reply or its error; `Err(reply)`: another
        /// reply, moved back.
        #[allow(clippy::type_complexity, clippy::result_large_err)]
        pub fn table_reply_to_pb(
            reply: Reply,
        ) -> Result<Result<Option<reply::Result>, ControllerError>, Reply> {
            $(
                let reply = match reply {
                    Reply::$reply { result, .. } => return Ok(result.map(WireOutput::to_result)),
                    other => other,
                };
            )*
            Err(reply)
        }

        /// The reply `r` stands for, when `event` is a request of the table.
        pub fn table_reply_from_pb(event: &Event, r: &pb::Reply) -> Option<Reply> {
            $(
                if let Event::$event { $($reply_field,)* .. } = event {
                    let result = if r.error_code == 0 {
                        <$output as WireOutput>::from_result(&r.result).ok_or_else(|| remote_error(r))
                    } else {
                        Err(remote_error(r))
                    };
                    return Some(Reply::$reply { $($reply_field: $reply_field.clone(),)* result });
                }
            )*
            None
        }
    };
}

crate::requests::table::with_requests!(define_wire);
