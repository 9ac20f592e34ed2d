//! The control plane's conversions as both ends of a session call them:
//! a broker's request event to its message and back, the controller's
//! answer to its reply message and back. The requests of the table
//! (`requests/table.rs`) convert as their entries say (`request_wire.rs`);
//! the others are dispatched here: `CreateTopic` (below), ISR proposals
//! and elections (`partition_wire.rs`) and `AlterScramCredentials`
//! (`security_wire.rs`).

use super::field_wire::Wire;
use super::partition_wire as partitions;
pub use super::partition_wire::{changes_from_pb, changes_to_pb};
use super::pb::{self, reply, request};
use super::request_wire as rw;
use super::security_wire as sw;
pub use super::view_wire::{apply_view_pb, view_delta_to_pb, view_from_pb, view_to_pb};
use crate::{BrokerId, ControllerError, Event, NewTopic, Reply};

/// `CreateTopic`, outside the table: its event carries a [`NewTopic`], and
/// its reply carries no topic id (the broker takes it from its request).
impl Wire for NewTopic {
    type Pb = pb::CreateTopic;
    fn to_pb(&self) -> pb::CreateTopic {
        pb::CreateTopic {
            name: self.name.clone(),
            topic_id: self.topic_id.to_pb(),
            partitions: self.partitions,
            replication_factor: self.replication_factor as u32,
            configs: self.configs.to_pb(),
            validate_only: self.validate_only,
            assignment: self.assignment.to_pb(),
        }
    }
    fn from_pb(t: pb::CreateTopic) -> Self {
        NewTopic {
            name: t.name,
            topic_id: Wire::from_pb(t.topic_id),
            partitions: t.partitions,
            // As 0.2.0 read it (a broker sends a u16).
            replication_factor: t.replication_factor as u16,
            configs: Wire::from_pb(t.configs),
            assignment: Wire::from_pb(t.assignment),
            validate_only: t.validate_only,
        }
    }
}

/// The wire form of a broker's request event (`None`: not carried).
pub fn event_to_pb(event: &Event) -> Option<request::Kind> {
    if let Some(kind) = rw::derived_event_to_pb(event).or_else(|| partitions::request_to_pb(event))
    {
        return Some(kind);
    }
    Some(match event {
        Event::CreateTopic(t) => request::Kind::CreateTopic(t.to_pb()),
        Event::AlterScramCredentials {
            upsertions,
            deletions,
        } => sw::alter_scram_to_pb(upsertions, deletions),
        _ => return None,
    })
}

/// The controller's event for a request from broker `broker`.
///
/// # Panics
///
/// For a kind no conversion reads (see [`request_from_pb`]).
pub fn event_from_pb(broker: BrokerId, kind: request::Kind) -> Event {
    request_from_pb(broker, kind).expect("every request kind is read")
}

/// The controller's event for a request from broker `broker`. `None` for
/// a kind no conversion reads (a session answers it as unsupported).
pub fn request_from_pb(broker: BrokerId, kind: request::Kind) -> Option<Event> {
    let kind = match rw::derived_event_from_pb(broker, kind) {
        Ok(event) => return Some(event),
        Err(kind) => kind,
    };
    let kind = match partitions::request_from_pb(broker, kind) {
        Ok(event) => return Some(event),
        Err(kind) => kind,
    };
    Some(match kind {
        request::Kind::CreateTopic(t) => Event::CreateTopic(Wire::from_pb(t)),
        request::Kind::AlterScramCredentials(a) => sw::alter_scram_from_pb(a),
        // The derived ones and the partitions', read above.
        _ => return None,
    })
}

/// The wire reply for the controller's answer to one request.
pub fn reply_to_pb(id: u64, reply: Option<Reply>) -> pb::Reply {
    let mut out = pb::Reply {
        id,
        ..Default::default()
    };
    let Some(reply) = reply else {
        out.error_code = -1; // UNKNOWN_SERVER_ERROR
        out.error_message = "the controller gave no answer".into();
        return out;
    };
    match result_to_pb(reply) {
        Ok(result) => out.result = result,
        Err(e) => {
            out.error_code = e.kafka_code() as i32;
            out.error_message = e.to_string();
        }
    }
    out
}

/// A reply's place in the wire reply, or its error.
fn result_to_pb(reply: Reply) -> Result<Option<reply::Result>, ControllerError> {
    let reply = match rw::table_reply_to_pb(reply).or_else(partitions::reply_to_pb) {
        Ok(result) => return result,
        Err(reply) => reply,
    };
    match reply {
        Reply::CreateTopic { result, .. } => result.map(|_| None),
        other => unreachable!("{other:?} has a conversion above"),
    }
}

/// The controller-core reply a wire reply stands for, given the event it
/// answers.
pub fn reply_from_pb(event: &Event, r: pb::Reply) -> Reply {
    if let Some(reply) =
        rw::table_reply_from_pb(event, &r).or_else(|| partitions::reply_from_pb(event, &r))
    {
        return reply;
    }
    let err = || rw::remote_error(&r);
    match event {
        Event::CreateTopic(t) => Reply::CreateTopic {
            topic: t.name.clone(),
            result: if r.error_code == 0 {
                Ok(t.topic_id)
            } else {
                Err(err())
            },
        },
        // Not sent by brokers (see `event_to_pb`).
        _ => Reply::Heartbeat {
            broker: -1,
            result: Err(err()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TopicId;

    #[test]
    fn explicit_replica_assignments_cross_the_wire() {
        let mut t = NewTopic::new("t", TopicId(7), 2, 2);
        t.assignment = Some(vec![vec![3, 1], vec![2, 3]]);
        t.validate_only = true;
        let create = Event::CreateTopic(t);
        let kind = event_to_pb(&create).expect("sent by brokers");
        assert_eq!(event_from_pb(1, kind), create);
        let grow = Event::CreatePartitions {
            topic: "t".into(),
            count: 3,
            assignment: Some(vec![vec![1, 2]]),
        };
        assert_eq!(event_from_pb(1, event_to_pb(&grow).unwrap()), grow);
        let placed = Event::CreatePartitions {
            topic: "t".into(),
            count: 3,
            assignment: None,
        };
        assert_eq!(event_from_pb(1, event_to_pb(&placed).unwrap()), placed);
    }
}
