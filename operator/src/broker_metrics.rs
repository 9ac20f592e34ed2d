//! Reading brokers' Prometheus endpoints: the balancer's bytes on disk per
//! partition and the Topic status's local and remote (tiered) bytes come
//! from the same per-partition gauges the dashboards show.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Bytes of a partition's log on a broker's disks.
pub const LOG_SIZE: &str = "skein_log_size_bytes";
/// Bytes of a partition in remote storage (set by its leader).
pub const REMOTE_SIZE: &str = "skein_remote_log_size_bytes";
/// Segments of a partition in remote storage (set by its leader).
pub const REMOTE_SEGMENTS: &str = "skein_remote_log_segments";

/// `(topic, partition)` to value.
pub type PartitionGauge = BTreeMap<(String, i32), u64>;

/// `GET /metrics` from `addr` (host:port), at most `timeout` and 256 MiB.
pub async fn get_metrics(addr: &str, timeout: Duration) -> Result<String, String> {
    tokio::time::timeout(timeout, get(addr))
        .await
        .map_err(|_| format!("{addr}: no answer within {} s", timeout.as_secs()))?
}

async fn get(addr: &str) -> Result<String, String> {
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("{addr}: {e}"))?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: broker\r\n\r\n")
        .await
        .map_err(|e| format!("{addr}: {e}"))?;
    let mut buf = Vec::new();
    s.take(256 << 20)
        .read_to_end(&mut buf)
        .await
        .map_err(|e| format!("{addr}: {e}"))?;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{addr}: not an HTTP response"))?;
    let ok = head.starts_with("HTTP/1.") && head.split_whitespace().nth(1) == Some("200");
    if !ok {
        return Err(format!("{addr}: {}", head.lines().next().unwrap_or("")));
    }
    Ok(body.to_string())
}

/// The samples of the per-partition gauge `metric` (labels `topic` and
/// `partition`) in Prometheus text.
pub fn partition_gauge(text: &str, metric: &str) -> PartitionGauge {
    let prefix = format!("{metric}{{");
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(prefix.as_str()) else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |name: &str| {
            labels.split(',').find_map(|l| {
                l.strip_prefix(name)
                    .and_then(|v| v.strip_prefix("=\""))
                    .and_then(|v| v.strip_suffix('"'))
            })
        };
        let (Some(topic), Some(partition), Ok(value)) = (
            label("topic"),
            label("partition"),
            value.trim().parse::<f64>(),
        ) else {
            continue;
        };
        if let Ok(p) = partition.parse::<i32>() {
            out.insert((topic.to_string(), p), value.max(0.0) as u64);
        }
    }
    out
}

/// Folds one broker's samples into `into`, keeping each partition's
/// largest: its largest replica for bytes on disk; for the remote gauges,
/// which only a leader sets, the leader's (an old leader's stale value is
/// dropped at its next round).
pub fn merge_max(into: &mut PartitionGauge, from: PartitionGauge) {
    for (k, v) in from {
        let e = into.entry(k).or_default();
        *e = (*e).max(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gauge_is_read_by_its_exact_name_and_labels() {
        let text = "# HELP skein_log_size_bytes Bytes\n\
            skein_log_size_bytes{partition=\"3\",topic=\"orders\"} 1048576\n\
            skein_log_size_bytes{partition=\"0\",topic=\"a.b_c-d\"} 5\n\
            skein_log_segments{partition=\"3\",topic=\"orders\"} 2\n\
            skein_remote_log_size_bytes{partition=\"3\",topic=\"orders\"} 7e3\n\
            skein_remote_log_segments{partition=\"3\",topic=\"orders\"} 4\n";
        let s = partition_gauge(text, LOG_SIZE);
        assert_eq!(s.get(&("orders".to_string(), 3)), Some(&1_048_576));
        assert_eq!(s.len(), 2, "{s:?}");
        let r = partition_gauge(text, REMOTE_SIZE);
        assert_eq!(r, BTreeMap::from([(("orders".to_string(), 3), 7000)]));
        let n = partition_gauge(text, REMOTE_SEGMENTS);
        assert_eq!(n, BTreeMap::from([(("orders".to_string(), 3), 4)]));
    }

    #[test]
    fn merging_keeps_each_partitions_largest() {
        let k = |p| ("t".to_string(), p);
        let mut all = BTreeMap::from([(k(0), 10), (k(1), 5)]);
        merge_max(&mut all, BTreeMap::from([(k(0), 3), (k(1), 8), (k(2), 1)]));
        assert_eq!(all, BTreeMap::from([(k(0), 10), (k(1), 8), (k(2), 1)]));
    }
}
