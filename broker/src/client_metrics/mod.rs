//! Client telemetry (KIP-714): GetTelemetrySubscriptions tells a client
//! which of its metrics to push and how often, PushTelemetry brings them,
//! and the broker exports them on its own `/metrics` endpoint with the
//! client's labels, so operators see their clients' metrics without an
//! exporter in each application.
//!
//! What a client is asked for comes from the client-metrics subscriptions
//! (CLIENT_METRICS config resources, `kafka-client-metrics.sh`), which the
//! controller keeps and every broker reads from its view. The rules are
//! Kafka's `ClientMetricsManager`'s: a client instance id is handed out on
//! the first request; a subscription id identifies what the client was
//! told, and a push under another one is refused (UNKNOWN_SUBSCRIPTION_ID)
//! so the client asks again; requests come no more often than the push
//! interval (THROTTLING_QUOTA_EXCEEDED otherwise, except right after a
//! new subscription); a client that said it was terminating may push no
//! more. Kafka hands pushes to a plugin; Skein's exporter is built in
//! (`export`). It asks for cumulative sums, not Kafka's deltas, as
//! Prometheus counters are cumulative.

pub mod export;
pub mod subscriptions;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse, PushTelemetryRequest,
    PushTelemetryResponse,
};
use kafka_protocol::protocol::StrBytes;
use skein_controller::resource_configs::ResourceConfigs;
use uuid::Uuid;

use subscriptions::{ClientAttributes, Subscription, DEFAULT_INTERVAL_MS};

/// Compression types a client may push with, in the order the broker
/// prefers them (zstd, lz4, gzip, snappy), as Kafka.
pub const ACCEPTED_COMPRESSION: [i8; 4] = [4, 3, 1, 2];
/// Client instances one broker keeps (Kafka's cache size).
const MAX_INSTANCES: usize = 16_384;
/// An instance not heard from for this long (or three push intervals, if
/// longer) is forgotten, and its metrics leave `/metrics`.
const EXPIRY: Duration = Duration::from_secs(60);

/// Who sent a telemetry request.
pub struct Requester<'a> {
    pub client_id: &'a str,
    pub software: Option<&'a (String, String)>,
    pub peer: Option<SocketAddr>,
}

struct Instance {
    attributes: ClientAttributes,
    /// The subscriptions it was evaluated against.
    evaluated: Arc<ResourceConfigs>,
    subscription_id: i32,
    metrics: Vec<String>,
    push_interval_ms: i32,
    last_get: Option<Instant>,
    last_push: Option<Instant>,
    last_seen: Instant,
    terminating: bool,
    last_error: i16,
}

impl Instance {
    fn expires_after(&self) -> Duration {
        EXPIRY.max(Duration::from_millis(self.push_interval_ms as u64) * 3)
    }

    fn interval(&self) -> Duration {
        Duration::from_millis(self.push_interval_ms.max(0) as u64)
    }

    /// A get is on time a push interval after the last get or push.
    fn try_get(&mut self, now: Instant) -> bool {
        let last = self.last_get.max(self.last_push);
        let on_time = last.is_none_or(|t| now.duration_since(t) >= self.interval());
        if on_time {
            self.last_get = Some(now);
        }
        on_time
    }

    /// A push is on time right after a get (clients add jitter to the
    /// interval) or a push interval after the last push.
    fn try_push(&mut self, now: Instant) -> bool {
        let after_get = self.last_get.is_some() && self.last_get > self.last_push;
        let on_time = after_get
            || self
                .last_push
                .is_none_or(|t| now.duration_since(t) >= self.interval());
        if on_time {
            self.last_push = Some(now);
        }
        on_time
    }
}

/// Parsed subscriptions, cached by the view they came from.
struct Parsed {
    from: Arc<ResourceConfigs>,
    subscriptions: Arc<Vec<Subscription>>,
}

pub struct ClientMetrics {
    max_bytes: i32,
    instances: Mutex<HashMap<Uuid, Instance>>,
    /// When expired instances were last looked for (at most once a second
    /// on the request path: it walks every instance).
    last_sweep: Mutex<Instant>,
    parsed: Mutex<Option<Parsed>>,
    pub export: export::Exported,
    /// Skein's own metrics of client telemetry.
    registry: prometheus::Registry,
    instance_gauge: prometheus::IntGauge,
    dropped: prometheus::IntCounter,
    requests: prometheus::IntCounterVec,
}

/// What a client matching `subs` is asked for: the union of their metrics
/// (`*` alone if any asks for every metric) at the shortest interval.
fn evaluate(subs: &[Subscription], client: &ClientAttributes, id: Uuid) -> (Vec<String>, i32, i32) {
    let mut metrics = std::collections::BTreeSet::new();
    let mut interval = DEFAULT_INTERVAL_MS;
    let mut all = false;
    for s in subs.iter().filter(|s| s.selects(client)) {
        all |= s.metrics.iter().any(|m| m == "*");
        metrics.extend(s.metrics.iter().cloned());
        interval = interval.min(s.interval_ms);
    }
    let metrics: Vec<String> = if all {
        vec!["*".to_string()]
    } else {
        metrics.into_iter().collect()
    };
    // Kafka: a CRC32C of the metrics and the interval, XORed with the
    // instance id's hash; any stable function of the three serves.
    let text = format!("{metrics:?}{interval}");
    let (hi, lo) = id.as_u64_pair();
    let h = hi ^ lo;
    let id_hash = (h >> 32) as i32 ^ h as i32;
    let subscription_id = crc32c::crc32c(text.as_bytes()) as i32 ^ id_hash;
    (metrics, interval, subscription_id)
}

fn error_get(e: ResponseError) -> GetTelemetrySubscriptionsResponse {
    let mut r = GetTelemetrySubscriptionsResponse::default();
    r.error_code = e.code();
    r
}

fn error_push(e: ResponseError) -> PushTelemetryResponse {
    let mut r = PushTelemetryResponse::default();
    r.error_code = e.code();
    r
}

impl ClientMetrics {
    pub fn new(max_bytes: i32) -> Self {
        let registry = prometheus::Registry::new();
        let instance_gauge = prometheus::IntGauge::new(
            "skein_client_telemetry_instances",
            "Client instances (KIP-714) this broker knows",
        )
        .expect("valid metric");
        let dropped = prometheus::IntCounter::new(
            "skein_client_telemetry_points_dropped_total",
            "Pushed client metric values left out: not subscribed to, of an unsupported type, or past a limit",
        )
        .expect("valid metric");
        let requests = prometheus::IntCounterVec::new(
            prometheus::Opts::new(
                "skein_client_telemetry_requests_total",
                "GetTelemetrySubscriptions and PushTelemetry requests by outcome",
            ),
            &["api", "error"],
        )
        .expect("valid metric");
        for c in [
            Box::new(instance_gauge.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(dropped.clone()),
            Box::new(requests.clone()),
        ] {
            registry.register(c).expect("registered once");
        }
        ClientMetrics {
            max_bytes,
            instances: Mutex::new(HashMap::new()),
            last_sweep: Mutex::new(Instant::now()),
            parsed: Mutex::new(None),
            export: export::Exported::default(),
            registry,
            instance_gauge,
            dropped,
            requests,
        }
    }

    /// Skein's telemetry metrics and every client's pushed values, as text
    /// (after forgetting expired instances).
    pub fn render(&self) -> String {
        self.sweep();
        self.instance_gauge.set(self.instance_count() as i64);
        self.dropped
            .inc_by(self.export.dropped().saturating_sub(self.dropped.get()));
        let mut families = self.registry.gather();
        families.extend(self.export.families());
        prometheus::TextEncoder::new()
            .encode_to_string(&families)
            .unwrap_or_default()
    }

    fn count(&self, api: &str, error: i16) {
        let name = if error == 0 {
            "NONE".to_string()
        } else {
            ResponseError::try_from_code(error)
                .map(|e| format!("{e:?}"))
                .unwrap_or_else(|| error.to_string())
        };
        self.requests.with_label_values(&[api, &name]).inc();
    }

    /// The subscriptions of `configs`, parsed once per view. One that does
    /// not parse (it was checked when set, so only a later release's) is
    /// left out.
    fn subscriptions(&self, configs: &Arc<ResourceConfigs>) -> Arc<Vec<Subscription>> {
        let mut parsed = self.parsed.lock().unwrap();
        if let Some(p) = parsed.as_ref().filter(|p| Arc::ptr_eq(&p.from, configs)) {
            return p.subscriptions.clone();
        }
        let subs: Vec<Subscription> = configs
            .client_metrics
            .iter()
            .filter_map(|(name, values)| subscriptions::parse(name, values).ok())
            .collect();
        let subs = Arc::new(subs);
        *parsed = Some(Parsed {
            from: configs.clone(),
            subscriptions: subs.clone(),
        });
        subs
    }

    /// The instance `id`, created (or re-evaluated against subscriptions
    /// that changed since) as needed; `f` runs on it under the lock.
    fn with_instance<T>(
        &self,
        id: Uuid,
        who: &Requester,
        configs: &Arc<ResourceConfigs>,
        now: Instant,
        f: impl FnOnce(&mut Instance) -> T,
    ) -> T {
        let subs = self.subscriptions(configs);
        let mut instances = self.instances.lock().unwrap();
        {
            let mut last = self.last_sweep.lock().unwrap();
            if now.duration_since(*last) >= Duration::from_secs(1) {
                *last = now;
                self.expire(&mut instances, now);
            }
        }
        if !instances.contains_key(&id) && instances.len() >= MAX_INSTANCES {
            // Full: the least recently heard-from sixteenth goes at once, so
            // that a flood of new instances costs one sort per 1,024 of them.
            let mut by_age: Vec<(Instant, Uuid)> =
                instances.iter().map(|(k, i)| (i.last_seen, *k)).collect();
            by_age.sort_unstable();
            for (_, old) in by_age.into_iter().take(MAX_INSTANCES / 16) {
                instances.remove(&old);
                self.export.forget(old);
            }
        }
        let instance = instances.entry(id).or_insert_with(|| {
            let attributes = attributes(id, who);
            let (metrics, push_interval_ms, subscription_id) = evaluate(&subs, &attributes, id);
            Instance {
                attributes,
                evaluated: configs.clone(),
                subscription_id,
                metrics,
                push_interval_ms,
                last_get: None,
                last_push: None,
                last_seen: now,
                terminating: false,
                last_error: 0,
            }
        });
        if !Arc::ptr_eq(&instance.evaluated, configs) {
            let (metrics, interval, subscription_id) = evaluate(&subs, &instance.attributes, id);
            if subscription_id != instance.subscription_id {
                // A new subscription: as Kafka, a new instance, whose get
                // is answered at once.
                instance.metrics = metrics;
                instance.push_interval_ms = interval;
                instance.subscription_id = subscription_id;
                instance.last_get = None;
                instance.last_push = None;
            }
            instance.evaluated = configs.clone();
        }
        instance.last_seen = now;
        f(instance)
    }

    fn expire(&self, instances: &mut HashMap<Uuid, Instance>, now: Instant) {
        instances.retain(|id, i| {
            let keep = now.duration_since(i.last_seen) < i.expires_after();
            if !keep {
                self.export.forget(*id);
            }
            keep
        });
    }

    /// Forgets instances not heard from in time (and their metrics).
    pub fn sweep(&self) {
        let mut instances = self.instances.lock().unwrap();
        self.expire(&mut instances, Instant::now());
    }

    /// Client instances known.
    pub fn instance_count(&self) -> usize {
        self.instances.lock().unwrap().len()
    }

    pub fn get_subscriptions(
        &self,
        req: &GetTelemetrySubscriptionsRequest,
        who: &Requester,
        configs: &Arc<ResourceConfigs>,
    ) -> GetTelemetrySubscriptionsResponse {
        let r = self.get_inner(req, who, configs);
        self.count("get_telemetry_subscriptions", r.error_code);
        r
    }

    fn get_inner(
        &self,
        req: &GetTelemetrySubscriptionsRequest,
        who: &Requester,
        configs: &Arc<ResourceConfigs>,
    ) -> GetTelemetrySubscriptionsResponse {
        let now = Instant::now();
        let id = if req.client_instance_id.is_nil() {
            self.new_instance_id()
        } else {
            req.client_instance_id
        };
        let max_bytes = self.max_bytes;
        self.with_instance(id, who, configs, now, |i| {
            let retry_allowed = i.last_error == ResponseError::UnknownSubscriptionId.code()
                || i.last_error == ResponseError::UnsupportedCompressionType.code();
            if !i.try_get(now) && !retry_allowed {
                return error_get(ResponseError::ThrottlingQuotaExceeded);
            }
            i.last_error = 0;
            let mut r = GetTelemetrySubscriptionsResponse::default();
            r.client_instance_id = id;
            r.subscription_id = i.subscription_id;
            r.accepted_compression_types = ACCEPTED_COMPRESSION.to_vec();
            r.push_interval_ms = i.push_interval_ms;
            r.telemetry_max_bytes = max_bytes;
            r.delta_temporality = false;
            r.requested_metrics = i
                .metrics
                .iter()
                .map(|m| StrBytes::from(m.clone()))
                .collect();
            r
        })
    }

    fn new_instance_id(&self) -> Uuid {
        let instances = self.instances.lock().unwrap();
        loop {
            let id = Uuid::new_v4();
            if !instances.contains_key(&id) {
                return id;
            }
        }
    }

    pub fn push(
        &self,
        req: &PushTelemetryRequest,
        who: &Requester,
        configs: &Arc<ResourceConfigs>,
    ) -> PushTelemetryResponse {
        let r = self.push_inner(req, who, configs);
        self.count("push_telemetry", r.error_code);
        r
    }

    fn push_inner(
        &self,
        req: &PushTelemetryRequest,
        who: &Requester,
        configs: &Arc<ResourceConfigs>,
    ) -> PushTelemetryResponse {
        let id = req.client_instance_id;
        // Kafka's reserved ids: zero and the metadata topic's (…0001).
        if id.is_nil() || id.as_u64_pair() == (0, 1) {
            return error_push(ResponseError::InvalidRequest);
        }
        let now = Instant::now();
        let checked = self.with_instance(id, who, configs, now, |i| {
            let outcome = if i.terminating {
                Err(ResponseError::InvalidRequest)
            } else if !i.try_push(now) && !req.terminating {
                Err(ResponseError::ThrottlingQuotaExceeded)
            } else if req.subscription_id != i.subscription_id {
                Err(ResponseError::UnknownSubscriptionId)
            } else if !(0..=4).contains(&req.compression_type) {
                Err(ResponseError::UnsupportedCompressionType)
            } else if req.metrics.len() > self.max_bytes as usize {
                Err(ResponseError::TelemetryTooLarge)
            } else {
                Ok((i.attributes.clone(), i.metrics.clone()))
            };
            i.terminating = req.terminating;
            i.last_error = outcome.as_ref().err().map_or(0, |e| e.code());
            outcome
        });
        let (attributes, wanted) = match checked {
            Ok(v) => v,
            Err(e) => return error_push(e),
        };
        if !req.metrics.is_empty() {
            let decoded = export::decode(&req.metrics, req.compression_type, self.max_bytes);
            match decoded {
                Ok(data) => self.export.store(id, &attributes, &wanted, data),
                Err(why) => {
                    tracing::debug!(client_instance_id = %id, %why, "client telemetry refused");
                    self.with_instance(id, who, configs, now, |i| {
                        i.last_error = ResponseError::InvalidRecord.code()
                    });
                    return error_push(ResponseError::InvalidRecord);
                }
            }
        }
        PushTelemetryResponse::default()
    }
}

/// A UUID as Kafka's `Uuid.toString()` writes it (URL-safe base64), as
/// clients show their instance id.
pub fn kafka_uuid(id: Uuid) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.as_bytes())
}

/// A client's attributes as subscriptions match them (Kafka's
/// `ClientMetricsInstanceMetadata`).
fn attributes(id: Uuid, who: &Requester) -> ClientAttributes {
    let mut a = ClientAttributes::new();
    a.insert("client_instance_id", kafka_uuid(id));
    a.insert("client_id", who.client_id.to_string());
    if let Some((name, version)) = who.software {
        a.insert("client_software_name", name.clone());
        a.insert("client_software_version", version.clone());
    }
    if let Some(peer) = who.peer {
        a.insert("client_source_address", peer.ip().to_string());
        a.insert("client_source_port", peer.port().to_string());
    }
    a
}

#[cfg(test)]
mod tests;
