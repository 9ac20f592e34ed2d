//! The identity of a broker's log directory (Kafka's `meta.properties`):
//! which cluster and node it belongs to, and a directory id drawn when the
//! directory is formatted. The controller remembers the directory id behind
//! each broker; a broker that comes back with another one (a lost disk, a
//! new PersistentVolumeClaim) is known to hold no data, whatever the ISR
//! says, so it is never elected on the strength of data it no longer has.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use skein_controller::DirectoryId;

use skein_controller::kafka_base64;
use skein_storage::write_atomic;

/// The node id's key: Kafka's meta.properties names it as the broker
/// config it comes from.
const NODE_ID: &str = skein_controller::broker_config::NODE_ID.name;

/// The file's name in the log directory, as Kafka names it.
pub const FILE_NAME: &str = "meta.properties";

/// The one version of the format Skein writes (Kafka's KRaft version 1).
const VERSION: &str = "1";

/// Why a log directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum MetaPropertiesError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error(
        "log directory {dir} belongs to node {found} (node.id in {FILE_NAME}), not to node {expected}; \
         point this broker at its own directory or remove that one"
    )]
    OtherNode {
        dir: PathBuf,
        found: i32,
        expected: i32,
    },
    #[error(
        "log directory {dir} belongs to cluster {found} (cluster.id in {FILE_NAME}), but this broker \
         joined cluster {expected}; point it at a directory of this cluster or remove that one"
    )]
    OtherCluster {
        dir: PathBuf,
        found: String,
        expected: String,
    },
}

/// What `meta.properties` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaProperties {
    /// Unknown until the broker first joins a cluster.
    pub cluster_id: Option<String>,
    pub node_id: i32,
    pub directory_id: DirectoryId,
}

impl MetaProperties {
    /// The file's text, Kafka's `key=value` lines.
    pub fn to_text(&self) -> String {
        let mut text =
            String::from("#\n# Written by skein-broker: the identity of this log directory.\n");
        if let Some(c) = &self.cluster_id {
            text.push_str(&format!("cluster.id={c}\n"));
        }
        text.push_str(&format!(
            "directory.id={}\n{NODE_ID}={}\nversion={VERSION}\n",
            kafka_base64(self.directory_id.0.to_be_bytes()),
            self.node_id
        ));
        text
    }

    /// Parses the file's text.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut keys = BTreeMap::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            let (k, v) = line
                .split_once('=')
                .ok_or_else(|| format!("not a key=value line: {line:?}"))?;
            keys.insert(k.trim().to_string(), v.trim().to_string());
        }
        match keys.get("version").map(String::as_str) {
            Some(VERSION) => {}
            Some(v) => return Err(format!("version {v} is not supported (only {VERSION})")),
            None => return Err("no version".into()),
        }
        let node_id = keys
            .get(NODE_ID)
            .ok_or_else(|| format!("no {NODE_ID}"))?
            .parse()
            .map_err(|e| format!("{NODE_ID}: {e}"))?;
        let directory_id = keys
            .get("directory.id")
            .ok_or("no directory.id")
            .and_then(|d| decode_kafka_base64(d).ok_or("directory.id is not a base64 UUID"))?;
        Ok(MetaProperties {
            cluster_id: keys.get("cluster.id").cloned().filter(|c| !c.is_empty()),
            node_id,
            directory_id: DirectoryId(u128::from_be_bytes(directory_id)),
        })
    }

    /// Reads `dir/meta.properties`; `None` when the directory has none.
    pub fn load(dir: &Path) -> Result<Option<Self>, MetaPropertiesError> {
        let path = dir.join(FILE_NAME);
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::parse(&text)
                .map(Some)
                .map_err(|message| MetaPropertiesError::Invalid { path, message }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(MetaPropertiesError::Io { path, source }),
        }
    }

    /// Writes `dir/meta.properties` atomically (write, fsync, rename).
    pub fn store(&self, dir: &Path) -> Result<(), MetaPropertiesError> {
        let path = dir.join(FILE_NAME);
        write_atomic(&path, self.to_text().as_bytes())
            .map_err(|source| MetaPropertiesError::Io { path, source })
    }

    /// The identity of `dir` for node `node_id`: read, or written with a new
    /// directory id when the directory has none (a new or emptied disk, or
    /// one from before Skein kept directory ids). Refuses another node's
    /// directory.
    pub fn ensure(dir: &Path, node_id: i32) -> Result<Self, MetaPropertiesError> {
        std::fs::create_dir_all(dir).map_err(|source| MetaPropertiesError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        if let Some(meta) = Self::load(dir)? {
            if meta.node_id != node_id {
                return Err(MetaPropertiesError::OtherNode {
                    dir: dir.to_path_buf(),
                    found: meta.node_id,
                    expected: node_id,
                });
            }
            return Ok(meta);
        }
        let meta = MetaProperties {
            cluster_id: None,
            node_id,
            directory_id: DirectoryId(uuid::Uuid::new_v4().as_u128()),
        };
        meta.store(dir)?;
        tracing::info!(dir = %dir.display(), directory_id = %meta.directory_id, "formatted the log directory");
        Ok(meta)
    }

    /// Records the cluster this directory joined, or refuses a directory
    /// that belongs to another one.
    pub fn join_cluster(
        &mut self,
        dir: &Path,
        cluster_id: &str,
    ) -> Result<(), MetaPropertiesError> {
        match &self.cluster_id {
            Some(c) if c == cluster_id => Ok(()),
            Some(c) => Err(MetaPropertiesError::OtherCluster {
                dir: dir.to_path_buf(),
                found: c.clone(),
                expected: cluster_id.to_string(),
            }),
            None => {
                self.cluster_id = Some(cluster_id.to_string());
                self.store(dir)
            }
        }
    }
}

/// Decodes the 22-character URL-safe base64 (no padding) Kafka prints ids in.
fn decode_kafka_base64(text: &str) -> Option<[u8; 16]> {
    if text.len() != 22 {
        return None;
    }
    let mut acc: u32 = 0;
    let mut bits = 0;
    let mut out = Vec::with_capacity(16);
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_the_file_format() {
        let meta = MetaProperties {
            cluster_id: Some("q1Sh-9_ISia_zwGINzRvyQ".into()),
            node_id: 3,
            directory_id: DirectoryId(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210),
        };
        assert_eq!(MetaProperties::parse(&meta.to_text()), Ok(meta.clone()));
        let no_cluster = MetaProperties {
            cluster_id: None,
            ..meta
        };
        assert_eq!(MetaProperties::parse(&no_cluster.to_text()), Ok(no_cluster));
    }

    #[test]
    fn reads_kafkas_own_file() {
        // As `kafka-storage.sh format` writes it.
        let text = "#\n#Tue Dec 01 10:00:00 UTC 2026\nnode.id=1\ndirectory.id=J8aAPcfLQt2bqs1JT_rMgQ\nversion=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n";
        let meta = MetaProperties::parse(text).unwrap();
        assert_eq!(meta.node_id, 1);
        assert_eq!(meta.cluster_id.as_deref(), Some("MkU3OEVBNTcwNTJENDM2Qk"));
        assert_eq!(
            kafka_base64(meta.directory_id.0.to_be_bytes()),
            "J8aAPcfLQt2bqs1JT_rMgQ"
        );
    }

    #[test]
    fn bad_files_are_refused_with_a_reason() {
        assert!(
            MetaProperties::parse("node.id=1\ndirectory.id=J8aAPcfLQt2bqs1JT_rMgQ\n")
                .unwrap_err()
                .contains("version")
        );
        assert!(MetaProperties::parse("version=0\nnode.id=1\n")
            .unwrap_err()
            .contains("not supported"));
        assert!(MetaProperties::parse("version=1\nnode.id=x\n")
            .unwrap_err()
            .contains("node.id"));
        assert!(
            MetaProperties::parse("version=1\nnode.id=1\ndirectory.id=short\n")
                .unwrap_err()
                .contains("directory.id")
        );
    }

    #[test]
    fn an_empty_directory_is_formatted_once() {
        let dir = tempfile::tempdir().unwrap();
        let first = MetaProperties::ensure(dir.path(), 2).unwrap();
        let again = MetaProperties::ensure(dir.path(), 2).unwrap();
        assert_eq!(first, again, "the directory id is kept across starts");
        let other = tempfile::tempdir().unwrap();
        let elsewhere = MetaProperties::ensure(other.path(), 2).unwrap();
        assert_ne!(first.directory_id, elsewhere.directory_id);
    }

    #[test]
    fn another_nodes_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        MetaProperties::ensure(dir.path(), 1).unwrap();
        let err = MetaProperties::ensure(dir.path(), 2).unwrap_err();
        assert!(matches!(
            err,
            MetaPropertiesError::OtherNode {
                found: 1,
                expected: 2,
                ..
            }
        ));
        assert!(err.to_string().contains("belongs to node 1"));
    }

    #[test]
    fn another_clusters_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut meta = MetaProperties::ensure(dir.path(), 1).unwrap();
        meta.join_cluster(dir.path(), "first").unwrap();
        let mut reread = MetaProperties::load(dir.path()).unwrap().unwrap();
        assert_eq!(reread.cluster_id.as_deref(), Some("first"));
        reread.join_cluster(dir.path(), "first").unwrap();
        let err = reread.join_cluster(dir.path(), "second").unwrap_err();
        assert!(err.to_string().contains("belongs to cluster first"));
    }
}
