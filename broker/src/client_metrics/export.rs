//! The built-in exporter of client telemetry: a push's OTLP `MetricsData`
//! (KIP-714's payload) is decoded, kept as the client's latest values, and
//! rendered on the broker's `/metrics` with the client's labels.
//!
//! A metric `org.apache.kafka.producer.record.send.total` becomes the
//! Prometheus family `org_apache_kafka_producer_record_send_total`:
//! characters Prometheus does not allow become `_`. Every sample carries
//! `client_instance_id`, `client_id`, `client_software_name` and
//! `client_software_version`, then the data point's own attributes (the
//! resource's under them). Gauges and non-monotonic sums are gauges,
//! monotonic sums counters; histograms and summaries (Kafka's clients send
//! none) are left out.
//!
//! Clients are peers, not trusted: only metrics the client was asked for
//! are kept, a push keeps at most [`MAX_POINTS_PER_CLIENT`] values, the
//! broker at most [`MAX_POINTS`], a name may not pose as one of Skein's own
//! (`skein_*`), and label values are cut at [`MAX_LABEL_BYTES`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point, MetricsData};
use prometheus::proto::{self, MetricFamily, MetricType};
use prost::Message;
use uuid::Uuid;

use super::subscriptions::ClientAttributes;

/// Values one push may leave on `/metrics`.
pub const MAX_POINTS_PER_CLIENT: usize = 5_000;
/// Values every client together may leave on `/metrics`.
pub const MAX_POINTS: usize = 200_000;
/// The longest label value kept (longer ones are cut).
pub const MAX_LABEL_BYTES: usize = 256;
/// The client's own labels, in order.
const CLIENT_LABELS: [&str; 4] = [
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
}

/// One value of one client.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub family: String,
    pub kind: Kind,
    pub help: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

/// The latest values of every client that pushed.
#[derive(Default)]
pub struct Exported {
    clients: Mutex<HashMap<Uuid, Vec<Point>>>,
    dropped: std::sync::atomic::AtomicU64,
}

/// Decompresses and decodes a push's payload; the error says why not.
pub fn decode(payload: &[u8], compression: i8, max_bytes: i32) -> Result<MetricsData, String> {
    let raw =
        skein_storage::record_decode::decompress(payload, compression as u8, max_bytes as usize)
            .map_err(|e| e.to_string())?;
    MetricsData::decode(raw).map_err(|e| format!("not an OTLP MetricsData: {e}"))
}

/// A name as Prometheus allows it: `[a-zA-Z_:][a-zA-Z0-9_:]*`, other
/// characters `_` (a leading digit gets a `_` before it).
pub fn prometheus_name(name: &str, colons: bool) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || (colons && c == ':') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

fn cut(mut s: String) -> String {
    if s.len() > MAX_LABEL_BYTES {
        let mut end = MAX_LABEL_BYTES;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

fn attribute_value(v: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        _ => String::new(),
    }
}

/// Labels from attributes: sanitized names, the client's own names and
/// reserved (`__`) ones left out, the first of a name kept.
fn add_attributes(labels: &mut Vec<(String, String)>, attributes: &[KeyValue]) {
    for kv in attributes {
        let name = prometheus_name(&kv.key, false);
        if name.is_empty() || name.starts_with("__") || labels.iter().any(|(n, _)| *n == name) {
            continue;
        }
        labels.push((name, cut(attribute_value(&kv.value))));
    }
}

/// Whether a client asked for `wanted` prefixes would send `name`.
fn wanted(name: &str, prefixes: &[String]) -> bool {
    prefixes
        .iter()
        .any(|p| p == "*" || name.starts_with(p.as_str()))
}

/// The points of one push, at most [`MAX_POINTS_PER_CLIENT`] (and how many
/// were left out).
pub fn points(
    client: &ClientAttributes,
    prefixes: &[String],
    data: MetricsData,
) -> (Vec<Point>, usize) {
    let mut base = Vec::new();
    for name in CLIENT_LABELS {
        let value = client.get(name).cloned().unwrap_or_default();
        base.push((name.to_string(), cut(value)));
    }
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut dropped = 0;
    for rm in data.resource_metrics {
        let resource = rm.resource.map(|r| r.attributes).unwrap_or_default();
        for sm in rm.scope_metrics {
            for m in sm.metrics {
                if !wanted(&m.name, prefixes) {
                    dropped += 1;
                    continue;
                }
                let family = prometheus_name(&m.name, true);
                if family.is_empty() || family.starts_with("skein") {
                    dropped += 1;
                    continue;
                }
                let (kind, data_points) = match m.data {
                    Some(metric::Data::Gauge(g)) => (Kind::Gauge, g.data_points),
                    Some(metric::Data::Sum(s)) if s.is_monotonic => (Kind::Counter, s.data_points),
                    Some(metric::Data::Sum(s)) => (Kind::Gauge, s.data_points),
                    _ => {
                        dropped += 1;
                        continue;
                    }
                };
                for dp in data_points {
                    let value = match dp.value {
                        Some(number_data_point::Value::AsDouble(d)) => d,
                        Some(number_data_point::Value::AsInt(i)) => i as f64,
                        None => continue,
                    };
                    if out.len() >= MAX_POINTS_PER_CLIENT {
                        dropped += 1;
                        continue;
                    }
                    let mut labels = base.clone();
                    add_attributes(&mut labels, &dp.attributes);
                    add_attributes(&mut labels, &resource);
                    // One value per series: a repeated one is left out.
                    if !seen.insert((family.clone(), labels.clone())) {
                        dropped += 1;
                        continue;
                    }
                    out.push(Point {
                        family: family.clone(),
                        kind,
                        help: cut(m.description.clone()),
                        labels,
                        value,
                    });
                }
            }
        }
    }
    (out, dropped)
}

impl Exported {
    /// Keeps a push's values as the client's latest, within the limits.
    pub fn store(
        &self,
        id: Uuid,
        client: &ClientAttributes,
        prefixes: &[String],
        data: MetricsData,
    ) {
        let (mut pts, mut dropped) = points(client, prefixes, data);
        let mut clients = self.clients.lock().unwrap();
        let others: usize = clients
            .iter()
            .filter(|(k, _)| **k != id)
            .map(|(_, v)| v.len())
            .sum();
        let room = MAX_POINTS.saturating_sub(others);
        if pts.len() > room {
            dropped += pts.len() - room;
            pts.truncate(room);
        }
        clients.insert(id, pts);
        self.dropped
            .fetch_add(dropped as u64, std::sync::atomic::Ordering::Relaxed);
    }

    /// Removes a client's values (it expired).
    pub fn forget(&self, id: Uuid) {
        self.clients.lock().unwrap().remove(&id);
    }

    /// Values left out since the start: not asked for, of an unsupported
    /// type, or past a limit.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Every client's values as metric families, by name. A family whose
    /// clients disagree on its type keeps the first type seen.
    pub fn families(&self) -> Vec<MetricFamily> {
        let clients = self.clients.lock().unwrap();
        let mut families: BTreeMap<&str, MetricFamily> = BTreeMap::new();
        let mut ids: Vec<&Uuid> = clients.keys().collect();
        ids.sort();
        for id in ids {
            for p in &clients[id] {
                let mf = families.entry(p.family.as_str()).or_insert_with(|| {
                    let mut mf = MetricFamily::default();
                    mf.set_name(p.family.clone());
                    mf.set_help(if p.help.is_empty() {
                        "Client telemetry (KIP-714)".to_string()
                    } else {
                        p.help.clone()
                    });
                    mf.set_field_type(match p.kind {
                        Kind::Gauge => MetricType::GAUGE,
                        Kind::Counter => MetricType::COUNTER,
                    });
                    mf
                });
                let kind = match mf.get_field_type() {
                    MetricType::COUNTER => Kind::Counter,
                    _ => Kind::Gauge,
                };
                if kind != p.kind {
                    continue;
                }
                let labels = p
                    .labels
                    .iter()
                    .map(|(n, v)| {
                        let mut l = proto::LabelPair::default();
                        l.set_name(n.clone());
                        l.set_value(v.clone());
                        l
                    })
                    .collect();
                let mut m = proto::Metric::default();
                m.set_label(labels);
                match kind {
                    Kind::Gauge => {
                        let mut g = proto::Gauge::default();
                        g.set_value(p.value);
                        m.set_gauge(g);
                    }
                    Kind::Counter => {
                        let mut c = proto::Counter::default();
                        c.set_value(p.value);
                        m.set_counter(c);
                    }
                }
                mf.mut_metric().push(m);
            }
        }
        families.into_values().collect()
    }
}
