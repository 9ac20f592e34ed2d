//! The `control_plane` target: one message a controller session delivers to
//! a broker (`ControllerMessage`, protobuf), decoded and applied the way the
//! broker's session loop does: a whole or delta metadata view, partition
//! instructions, a reply.
//!
//! The controller is a network peer like any other: whatever it sends,
//! decoding must not panic or allocate without bound, and a topic name the
//! broker would turn into a directory must stay a name inside the data
//! directory (no '/', no '..': `metadata::validate_topic_name`).

use std::path::Path;

use prost::Message;
use skein_controller::rpc::pb::controller_message::Kind;
use skein_controller::rpc::pb::ControllerMessage;
use skein_controller::rpc::wire::{apply_view_pb, changes_from_pb};
use skein_controller::{ClusterView, PartitionChange};

/// Where the harness pretends the broker keeps its data.
const DATA_DIR: &str = "/data";

/// Decodes `data` as a controller message and applies it to an empty view.
pub fn run(data: &[u8]) {
    let Ok(msg) = ControllerMessage::decode(data) else {
        return;
    };
    match msg.kind {
        Some(Kind::Metadata(v)) => {
            let Ok(view) = apply_view_pb(&ClusterView::default(), v) else {
                return;
            };
            for (name, t) in &view.topics {
                for index in 0..t.partitions.len() as i32 {
                    check_path(name, index);
                }
            }
        }
        Some(Kind::Changes(c)) => {
            for change in changes_from_pb(c) {
                let (PartitionChange::Leader {
                    topic, partition, ..
                }
                | PartitionChange::Follower {
                    topic, partition, ..
                }
                | PartitionChange::Stop {
                    topic, partition, ..
                }) = &change;
                check_path(topic, *partition);
            }
        }
        Some(Kind::Reply(_)) | None => {}
    }
}

/// A name the broker accepts as a topic becomes `DATA_DIR/<name>-<index>`,
/// one level below the data directory and nowhere else.
fn check_path(topic: &str, index: i32) {
    if skein_broker::metadata::validate_topic_name(topic).is_err() || index < 0 {
        return;
    }
    let dir = Path::new(DATA_DIR).join(skein_broker::partition::Partition::dir_name(topic, index));
    assert_eq!(
        dir.parent(),
        Some(Path::new(DATA_DIR)),
        "topic {topic:?} escapes the data directory"
    );
    assert!(!dir.ends_with(".."), "topic {topic:?} names a parent directory");
}
