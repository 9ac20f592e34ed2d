//! Opening a partition log after a clean or unclean shutdown (Kafka's
//! `LogLoader`): finish or discard an interrupted compaction swap, drop
//! half-written and orphaned files, then open the segments, re-validating
//! every one after the recovery point unless the last shutdown was clean.
//!
//! Compaction writes `<base>.{log,index,timeindex}.cleaned`, renames them to
//! `.swap` (indexes first, the `.log` last: a `.log.swap` means the cleaned
//! data is complete), then renames the `.swap` files over the live ones
//! (indexes first again, so a remaining `.log.swap` still marks unfinished work).

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::checkpoint::{self, sync_dir};
use crate::config::LogConfig;
use crate::error::StorageError;
use crate::leader_epoch::{LeaderEpochCache, LEADER_EPOCH_FILE};
use crate::log::{
    Log, CLEANER_CHECKPOINT_FILE, CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_FILE, RECOVERY_POINT_FILE,
};
use crate::segment::{file_path, LogSegment, DELETED, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX};
use crate::txn_index::TXN_INDEX_SUFFIX;

/// Suffix of compaction output still being written.
pub(crate) const CLEANED: &str = ".cleaned";
/// Suffix of complete compaction output waiting to replace the live segment.
pub(crate) const SWAP: &str = ".swap";
/// A file name split into (base offset, kind, extra suffix).
fn parse_name(name: &str) -> Option<(i64, &str, &str)> {
    let (base, rest) = name.split_once('.')?;
    if base.len() != 20 || !base.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let base = base.parse().ok()?;
    let (kind, extra) = match rest.split_once('.') {
        Some((kind, _)) => (kind, &rest[kind.len()..]),
        None => (rest, ""),
    };
    if ![
        LOG_SUFFIX,
        INDEX_SUFFIX,
        TIME_INDEX_SUFFIX,
        TXN_INDEX_SUFFIX,
    ]
    .contains(&kind)
    {
        return None;
    }
    Some((base, kind, extra))
}

/// What the directory holds once cleaned up.
#[derive(Debug, Default)]
pub(crate) struct DirState {
    /// Base offsets of the segments, ascending.
    pub bases: Vec<i64>,
    /// Segments whose compaction swap was completed here: their indexes must
    /// be rebuilt because the swap may have been cut between renames.
    pub swapped: BTreeSet<i64>,
}

fn remove_if_exists(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Cleans up `dir` and lists its segments.
pub(crate) fn prepare_dir(dir: &Path) -> io::Result<DirState> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        if let Some(name) = name.to_str() {
            if let Some((base, kind, extra)) = parse_name(name) {
                files.push((base, kind.to_string(), extra.to_string()));
            }
        }
    }
    let mut changed = false;
    let mut state = DirState::default();

    // Complete swaps whose cleaned `.log` was fully in place.
    for (base, kind, extra) in &files {
        if kind == LOG_SUFFIX && extra == SWAP {
            tracing::info!(base, "completing interrupted compaction swap");
            for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
                remove_if_exists(&file_path(dir, *base, suffix, SWAP))?;
                remove_if_exists(&file_path(dir, *base, suffix, ""))?;
            }
            // Compaction copies the source's transaction index unchanged, so
            // whichever of the two is there is right; prefer the new one.
            let txn_swap = file_path(dir, *base, TXN_INDEX_SUFFIX, SWAP);
            if txn_swap.exists() {
                fs::rename(&txn_swap, file_path(dir, *base, TXN_INDEX_SUFFIX, ""))?;
            }
            fs::rename(
                file_path(dir, *base, LOG_SUFFIX, SWAP),
                file_path(dir, *base, LOG_SUFFIX, ""),
            )?;
            state.swapped.insert(*base);
            changed = true;
        }
    }
    // Anything else temporary is incomplete work: discard it.
    for (base, kind, extra) in &files {
        let swapped_log = kind == LOG_SUFFIX && extra == SWAP;
        let swapped_index =
            extra == SWAP && state.swapped.contains(base) && kind != TXN_INDEX_SUFFIX;
        let temporary = [CLEANED, SWAP, DELETED].contains(&extra.as_str());
        if temporary && !swapped_log && !swapped_index {
            remove_if_exists(&file_path(dir, *base, kind, extra))?;
            changed = true;
        }
    }
    let logs: BTreeSet<i64> = files
        .iter()
        .filter(|(_, kind, extra)| kind == LOG_SUFFIX && (extra.is_empty() || extra == SWAP))
        .map(|(base, _, _)| *base)
        .collect();
    // Index files without a log (a deletion cut short) would confuse a later
    // segment created at the same offset.
    for (base, kind, extra) in &files {
        if kind != LOG_SUFFIX && extra.is_empty() && !logs.contains(base) {
            remove_if_exists(&file_path(dir, *base, kind, ""))?;
            changed = true;
        }
    }
    if changed {
        sync_dir(dir)?;
    }
    state.bases = logs.into_iter().collect();
    Ok(state)
}

impl Log {
    /// Opens (creating if missing) the partition directory and recovers it:
    /// interrupted compaction swaps are finished or discarded, and unless the
    /// last shutdown was clean every segment from the recovery point on is
    /// validated batch by batch and truncated at the first torn, corrupt or
    /// out-of-order batch (later segments are then deleted).
    pub fn open(
        dir: impl Into<PathBuf>,
        config: LogConfig,
        now_ms: i64,
    ) -> Result<Log, StorageError> {
        let dir = dir.into();
        // A partition this broker has never held: nothing to recover, and
        // nothing to make durable yet (a crash that loses the new directory
        // loses no record; it is made again). Creating thousands of
        // partitions then costs no fsync per partition.
        let is_new = !dir.exists();
        fs::create_dir_all(&dir)?;
        let marker = dir.join(CLEAN_SHUTDOWN_FILE);
        let clean = marker.exists();
        let state = prepare_dir(&dir)?;
        let recovery_point = checkpoint::read(&dir.join(RECOVERY_POINT_FILE))?.unwrap_or(0);
        let start_checkpoint = checkpoint::read(&dir.join(LOG_START_OFFSET_FILE))?;
        let cleaner_checkpoint = checkpoint::read(&dir.join(CLEANER_CHECKPOINT_FILE))?.unwrap_or(0);

        let mut segments: Vec<LogSegment> = Vec::new();
        // Leader epochs seen in the batches of recovered segments.
        let mut recovered_epochs: Vec<(i32, i64)> = Vec::new();
        let bases = &state.bases;
        let mut i = 0;
        while i < bases.len() {
            let base = bases[i];
            let is_last = i + 1 == bases.len();
            // Segments ending after the recovery point may hold unflushed data.
            let beyond_recovery_point = is_last || bases[i + 1] > recovery_point;
            let recover = (!clean && beyond_recovery_point) || state.swapped.contains(&base);
            let min_offset = segments.last().map_or(i64::MIN, |s| s.next_offset());
            let (segment, truncated, epochs) = LogSegment::open(
                &dir,
                base,
                recover,
                min_offset,
                config.index_interval_bytes,
                now_ms,
            )?;
            segments.push(segment);
            recovered_epochs.extend(epochs);
            i += 1;
            if truncated > 0 && i < bases.len() {
                tracing::warn!(dir = %dir.display(), base, "deleting segments after a truncated one");
                for &later in &bases[i..] {
                    for suffix in [
                        LOG_SUFFIX,
                        INDEX_SUFFIX,
                        TIME_INDEX_SUFFIX,
                        TXN_INDEX_SUFFIX,
                    ] {
                        match fs::remove_file(file_path(&dir, later, suffix, "")) {
                            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                                return Err(e.into())
                            }
                            _ => {}
                        }
                    }
                }
                sync_dir(&dir)?;
                break;
            }
        }
        if segments.is_empty() {
            let base = start_checkpoint.unwrap_or(0).max(0);
            segments.push(crate::log::new_segment(&dir, base, &config)?);
        }
        let last = segments.last().expect("at least one segment");
        let log_end_offset = last.next_offset().max(last.base_offset());
        let first_base = segments[0].base_offset();
        // A tiered log's start may lie below its first local segment (the
        // rest is in remote storage); otherwise a start below it is the
        // trace of a crash between deleting segments and checkpointing.
        let log_start_offset = match start_checkpoint {
            Some(start) if config.remote_storage_enable => start.max(0),
            other => other.unwrap_or(first_base).max(first_base),
        }
        .min(log_end_offset);

        let mut epochs = LeaderEpochCache::load(dir.join(LEADER_EPOCH_FILE))?;
        epochs.truncate_from_end(log_end_offset)?;
        epochs.truncate_from_start(log_start_offset)?;
        // The cache is made durable only when the log is flushed (as Kafka
        // does since KAFKA-15046), so after a crash an epoch may be missing
        // for data after the recovery point: the batches say where each
        // epoch began (Kafka's LogSegment.recover does the same).
        for (epoch, start) in recovered_epochs {
            if start >= log_start_offset && epochs.latest_epoch().is_none_or(|e| epoch > e) {
                epochs.assign(epoch, start)?;
            }
        }
        let mut log = Log {
            epochs,
            dir,
            config,
            segments,
            log_start_offset,
            log_end_offset,
            recovery_point: recovery_point.min(log_end_offset),
            cleaner_checkpoint: cleaner_checkpoint.min(log_end_offset),
            unflushed_messages: 0,
            last_flush_ms: now_ms,
            producer_state: crate::producer_state::ProducerStateManager::new(),
            retired: Vec::new(),
            generation: 0,
            verification_guards: Default::default(),
            last_verification_guard: 0,
            highest_offset_in_remote: -1,
        };
        log.rebuild_producer_state(now_ms)?;
        if is_new {
            return Ok(log);
        }
        // Whatever recovery read back is now made durable, so the recovery
        // point can move to the end.
        log.flush()?;
        // (After a clean stop the stored start offset is usually the one in
        // force: it is not written, and fsynced, again. Without a stored
        // one the start is the first segment's base, found again the same
        // way on the next open: nothing to write either.)
        let derived = start_checkpoint.is_none() && log.log_start_offset == first_base;
        if start_checkpoint != Some(log.log_start_offset) && !derived {
            checkpoint::write(&log.dir.join(LOG_START_OFFSET_FILE), log.log_start_offset)?;
        }
        // A cleaner checkpoint past the recovered end (the tail it covered
        // was lost) is lowered on disk as well: the file then always holds
        // the value in force, so closing the log need not write it.
        if cleaner_checkpoint > log.cleaner_checkpoint {
            checkpoint::write(
                &log.dir.join(CLEANER_CHECKPOINT_FILE),
                log.cleaner_checkpoint,
            )?;
        }
        if clean {
            fs::remove_file(&marker)?;
            sync_dir(&log.dir)?;
        }
        Ok(log)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_segment_file_names() {
        assert_eq!(
            parse_name("00000000000000000042.log"),
            Some((42, "log", ""))
        );
        assert_eq!(
            parse_name("00000000000000000042.timeindex.swap"),
            Some((42, "timeindex", ".swap"))
        );
        assert_eq!(parse_name("recovery-point"), None);
        assert_eq!(parse_name("42.log"), None);
        assert_eq!(parse_name("00000000000000000042.snapshot"), None);
    }

    /// Found by the `log_recovery` fuzz target: a leader-epoch-checkpoint
    /// that is not UTF-8 (here the 24 bytes of a time index) made `Log::open`
    /// fail, so the partition never loaded; one claiming 10^15 entries made
    /// it reserve memory for all of them. The cache is advisory: both are
    /// now ignored like any malformed checkpoint, and the epochs are found
    /// again in the batches of the segment recovery re-reads.
    #[test]
    fn garbage_leader_epoch_checkpoint_does_not_stop_recovery() {
        let crash_input_checkpoint: &[u8] = &[
            0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00,
            0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x02, 0x00, 0x00, 0x00, 0x05,
        ];
        let huge_count: &[u8] = b"0\n1000000000000000\n1 0\n";
        for checkpoint in [crash_input_checkpoint, huge_count] {
            let dir = tempfile::tempdir().unwrap();
            let config = LogConfig::default();
            let mut log = Log::open(dir.path(), config.clone(), 0).unwrap();
            let mut b = crate::test_util::batch(3, 1_000);
            log.append_as_leader(&mut b, 1, 0, crate::AppendOrigin::Client)
                .unwrap();
            drop(log);
            fs::write(dir.path().join(LEADER_EPOCH_FILE), checkpoint).unwrap();
            let log = Log::open(dir.path(), config, 0).unwrap();
            assert_eq!(log.log_end_offset(), 3);
            assert_eq!(log.leader_epoch_entries(), vec![(1, 0)]);
        }
    }

    /// A partition directory made by `open` gets no checkpoints (no fsync
    /// per new partition); a crash before anything is written loses
    /// nothing, and the log opens again empty.
    #[test]
    fn a_new_log_writes_no_checkpoint_and_reopens_after_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        let log = Log::open(&path, LogConfig::default(), 0).unwrap();
        assert!(!path.join(RECOVERY_POINT_FILE).exists());
        assert!(!path.join(LOG_START_OFFSET_FILE).exists());
        drop(log);
        let mut log = Log::open(&path, LogConfig::default(), 0).unwrap();
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
        log.append_as_leader(
            &mut crate::test_util::batch(2, 1_000),
            0,
            0,
            crate::AppendOrigin::Client,
        )
        .unwrap();
        assert_eq!(log.log_end_offset(), 2);
    }

    /// New epochs are written to the checkpoint only when the log is
    /// flushed; after a crash, the batches after the recovery point give
    /// them back, so OffsetForLeaderEpoch answers as before the crash.
    #[test]
    fn epochs_not_flushed_before_a_crash_are_rebuilt_from_the_batches() {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig::default();
        let mut log = Log::open(dir.path(), config.clone(), 0).unwrap();
        log.assign_leader_epoch(1, 0).unwrap();
        log.append_as_leader(
            &mut crate::test_util::batch(3, 1_000),
            1,
            0,
            crate::AppendOrigin::Client,
        )
        .unwrap();
        log.flush().unwrap();
        // A new term: epoch 4 at offset 3, then an empty term 6 at 5.
        log.assign_leader_epoch(4, 3).unwrap();
        log.append_as_leader(
            &mut crate::test_util::batch(2, 1_000),
            4,
            0,
            crate::AppendOrigin::Client,
        )
        .unwrap();
        log.assign_leader_epoch(6, 5).unwrap();
        assert_eq!(log.leader_epoch_entries(), vec![(1, 0), (4, 3), (6, 5)]);
        let on_disk = fs::read_to_string(dir.path().join(LEADER_EPOCH_FILE)).unwrap();
        assert_eq!(on_disk, "0\n1\n1 0\n", "only the flushed epoch is written");
        drop(log); // a crash: no close
        let log = Log::open(dir.path(), config, 0).unwrap();
        assert_eq!(log.log_end_offset(), 5);
        // Epoch 4 wrote data and is back; epoch 6 wrote nothing and its
        // replica leads it no more.
        assert_eq!(log.leader_epoch_entries(), vec![(1, 0), (4, 3)]);
        assert_eq!(log.end_offset_for_epoch(1), Some((1, 3)));
    }

    /// A batch whose base offset (not covered by the CRC) is near i64::MAX
    /// overflowed `last_offset()` during the scan (a panic with overflow
    /// checks on, wrapped offsets in release); it is corrupt and truncated.
    #[test]
    fn batch_with_overflowing_offsets_is_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let mut log_bytes = crate::test_util::batch(2, 1_000);
        let mut bad = crate::test_util::batch(3, 2_000);
        bad[0..8].copy_from_slice(&(i64::MAX - 1).to_be_bytes());
        log_bytes.extend_from_slice(&bad);
        fs::write(dir.path().join("00000000000000000000.log"), &log_bytes).unwrap();
        let log = Log::open(dir.path(), LogConfig::default(), 0).unwrap();
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 2));
    }

    #[test]
    fn completes_log_swap_and_discards_partial_work() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let touch = |name: &str, body: &[u8]| fs::write(d.join(name), body).unwrap();
        // Segment 0: swap complete for the log -> the new log wins.
        touch("00000000000000000000.log", b"old");
        touch("00000000000000000000.index", b"");
        touch("00000000000000000000.log.swap", b"new");
        touch("00000000000000000000.index.swap", b"");
        // Segment 10: only cleaned files -> discarded, original kept.
        touch("00000000000000000010.log", b"orig");
        touch("00000000000000000010.log.cleaned", b"half");
        touch("00000000000000000010.index.swap", b"");
        // Orphan index of a deleted segment.
        touch("00000000000000000020.index", b"");
        let state = prepare_dir(d).unwrap();
        assert_eq!(state.bases, vec![0, 10]);
        assert!(state.swapped.contains(&0));
        assert_eq!(
            fs::read(d.join("00000000000000000000.log")).unwrap(),
            b"new"
        );
        assert_eq!(
            fs::read(d.join("00000000000000000010.log")).unwrap(),
            b"orig"
        );
        let mut names: Vec<_> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            vec!["00000000000000000000.log", "00000000000000000010.log"]
        );
    }
}
