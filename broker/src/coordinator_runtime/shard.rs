//! A coordinator's state machine over the partitions of its topic (Kafka's
//! `CoordinatorShard`): the runtime reads a partition into it again
//! whenever this broker leads the partition at another leader epoch than
//! the one it was read at, since followers replicate the records but do
//! not apply them.

use super::{replay, LoadedEpochs, Replayed};
use crate::partition::Partition;

/// What the runtime needs of a coordinator's state to (re)load a partition
/// of its topic into it.
pub trait CoordinatorShard {
    /// The leader epoch each partition was last read at.
    fn loaded_epochs(&mut self) -> &mut LoadedEpochs;
    /// Forgets what memory holds for the keys of partition `p` (of `n`),
    /// before it is read again at leader epoch `epoch`.
    fn unload(&mut self, p: i32, n: i32, epoch: i32);
    /// Applies one record or marker of partition `p`'s log, read at leader
    /// epoch `epoch`.
    fn replay(&mut self, p: i32, epoch: i32, item: Replayed<'_>);
    /// Partition `p` has been read to its end.
    fn loaded(&mut self, p: i32, n: i32, epoch: i32);
}

/// Reads partition `p` (of `n`), hosted here as `part`, into `shard` when
/// it was not read at the partition's current leader epoch: unload, replay
/// up to the log end, done. Returns that epoch and whether it was read now.
pub fn ensure_loaded(
    shard: &mut impl CoordinatorShard,
    part: &Partition,
    p: i32,
    n: i32,
) -> (i32, bool) {
    let epoch = part.leader_epoch();
    if shard.loaded_epochs().is_loaded(p, epoch) {
        return (epoch, false);
    }
    shard.unload(p, n, epoch);
    replay(part, part.log_end_offset(), |item| {
        shard.replay(p, epoch, item)
    });
    shard.loaded(p, n, epoch);
    shard.loaded_epochs().loaded(p, epoch);
    (epoch, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use skein_storage::AppendOrigin;

    /// Keeps the keys of what it replayed, and what happened to it.
    #[derive(Default)]
    struct Keys {
        epochs: LoadedEpochs,
        keys: Vec<String>,
        calls: Vec<String>,
    }

    impl CoordinatorShard for Keys {
        fn loaded_epochs(&mut self) -> &mut LoadedEpochs {
            &mut self.epochs
        }
        fn unload(&mut self, p: i32, n: i32, epoch: i32) {
            self.keys.clear();
            self.calls.push(format!("unload {p}/{n} at {epoch}"));
        }
        fn replay(&mut self, _p: i32, _epoch: i32, item: Replayed<'_>) {
            if let Replayed::Record { key, .. } = item {
                self.keys.push(String::from_utf8_lossy(&key).into_owned());
            }
        }
        fn loaded(&mut self, p: i32, n: i32, epoch: i32) {
            self.calls.push(format!("loaded {p}/{n} at {epoch}"));
        }
    }

    #[test]
    fn a_partition_is_read_once_per_leader_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let part = super::super::test_partition(dir.path(), 3);
        let mut batch = super::super::encode_batch(
            &[
                (
                    bytes::Bytes::from_static(b"a"),
                    Some(bytes::Bytes::from_static(b"1")),
                ),
                (bytes::Bytes::from_static(b"b"), None),
            ],
            0,
        );
        part.append_as_leader(&mut batch, false, 0, AppendOrigin::Coordinator)
            .unwrap();
        let mut shard = Keys::default();
        assert_eq!(ensure_loaded(&mut shard, &part, 0, 1), (3, true));
        assert_eq!(shard.keys, ["a", "b"]);
        // At the same epoch nothing is read again.
        assert_eq!(ensure_loaded(&mut shard, &part, 0, 1), (3, false));
        assert_eq!(shard.calls, ["unload 0/1 at 3", "loaded 0/1 at 3"]);
        // Forgotten (leadership lost and regained): read again, whole.
        shard.epochs.unload(0);
        assert_eq!(ensure_loaded(&mut shard, &part, 0, 1), (3, true));
        assert_eq!(shard.keys, ["a", "b"]);
        assert_eq!(shard.calls.len(), 4);
    }
}
