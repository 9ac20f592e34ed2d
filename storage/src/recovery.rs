//! Startup housekeeping of a partition directory before segments are opened:
//! finish or discard an interrupted compaction swap, drop half-written and
//! orphaned files, and list the segments.
//!
//! Compaction writes `<base>.{log,index,timeindex}.cleaned`, renames them to
//! `.swap` (indexes first, the `.log` last: a `.log.swap` means the cleaned
//! data is complete), then renames the `.swap` files over the live ones
//! (indexes first again, so a remaining `.log.swap` still marks unfinished work).

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::Path;

use crate::checkpoint::sync_dir;
use crate::segment::{file_path, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX};

/// Suffix of compaction output still being written.
pub(crate) const CLEANED: &str = ".cleaned";
/// Suffix of complete compaction output waiting to replace the live segment.
pub(crate) const SWAP: &str = ".swap";
/// Suffix of a segment scheduled for deletion.
pub(crate) const DELETED: &str = ".deleted";

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
    if ![LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX].contains(&kind) {
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
        let swapped_index = extra == SWAP && state.swapped.contains(base);
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
