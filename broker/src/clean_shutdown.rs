//! The broker's clean-shutdown marker (Kafka's `.kafka_cleanshutdown`): the
//! broker epoch it held, written after every log was flushed and closed, and
//! taken away when the broker starts. A broker that registers without it
//! stopped uncleanly (killed, crashed, a machine that lost power): it may have
//! lost records it had not flushed, and the controller no longer counts it
//! among the replicas known to hold everything committed (KIP-966).

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The marker's name in the data directory.
pub const FILE_NAME: &str = ".skein_cleanshutdown";

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Marker {
    version: u32,
    broker_epoch: i64,
}

/// Writes the marker (after the logs are closed).
pub fn write(data_dir: &Path, broker_epoch: u64) -> std::io::Result<()> {
    let marker = Marker {
        version: 0,
        broker_epoch: broker_epoch as i64,
    };
    let json = serde_json::to_vec(&marker).map_err(std::io::Error::other)?;
    skein_storage::write_atomic(&data_dir.join(FILE_NAME), &json)
}

/// Reads and removes the marker: the epoch of a clean stop, `None` after an
/// unclean one (or on a new directory). Removed at once, so a crash from now
/// on counts as unclean at the next start.
pub fn take(data_dir: &Path) -> std::io::Result<Option<u64>> {
    let path = data_dir.join(FILE_NAME);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    std::fs::remove_file(&path)?;
    if let Ok(dir) = std::fs::File::open(data_dir) {
        let _ = dir.sync_all();
    }
    // An unreadable marker proves nothing: unclean.
    Ok(serde_json::from_slice::<Marker>(&bytes)
        .ok()
        .and_then(|m| u64::try_from(m.broker_epoch).ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_is_read_once() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(take(dir.path()).unwrap(), None, "no marker: unclean");
        write(dir.path(), 42).unwrap();
        let text = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert_eq!(text, r#"{"version":0,"brokerEpoch":42}"#);
        assert_eq!(take(dir.path()).unwrap(), Some(42));
        assert_eq!(take(dir.path()).unwrap(), None, "taken away at start");
        std::fs::write(dir.path().join(FILE_NAME), b"garbage").unwrap();
        assert_eq!(take(dir.path()).unwrap(), None);
    }
}
