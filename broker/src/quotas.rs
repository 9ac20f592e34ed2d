//! Client quota enforcement, as Kafka's `ClientQuotaManager` and
//! `ClientRequestQuotaManager` do it: each produce request's size and each
//! consumer fetch response's size count against the byte-rate quota, and the
//! time the broker spends working on each request counts against
//! `request_percentage`, of the most specific entity that has one (user and
//! client id, then the user with the default client, the user, the default
//! user with the client, …, the default client id). Over the quota, the
//! response carries `throttle_time_ms` and the connection is muted for that
//! long (KIP-219): the client waits too, and no error is ever returned.
//!
//! Rates are measured over 11 one-second samples (`quota.window.num`,
//! `quota.window.size.seconds`); a client over its quota is throttled for
//! `(rate - quota) / quota × window`, so its average comes back to the
//! quota: at most the whole window (11 s) for byte rates, at most one
//! sample (1 s) for request time, as Kafka bounds them.
//!
//! `request_percentage` is a share of one thread: 100 lets a client keep
//! one core busy. A request's time is the time its handler actually runs
//! (the sum of its polls: decoding, the handler, not the time it waits in a
//! purgatory for replicas or for data to fetch), as Kafka counts the time
//! on its request-handler threads rather than a request's whole latency.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ResponseKind;
use skein_controller::{ClientQuotas, QuotaEntity, QuotaEntityType};

/// Samples per rate and the length of one.
const SAMPLES: usize = 11;
const SAMPLE: Duration = Duration::from_secs(1);

/// Which quota a request counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    Produce,
    Fetch,
    /// Request handling time, as a percentage of one thread.
    Request,
}

impl QuotaKind {
    pub fn key(self) -> &'static str {
        match self {
            QuotaKind::Produce => "producer_byte_rate",
            QuotaKind::Fetch => "consumer_byte_rate",
            QuotaKind::Request => "request_percentage",
        }
    }

    /// The longest one throttle may be.
    fn max_throttle(self) -> Duration {
        match self {
            QuotaKind::Request => SAMPLE,
            _ => SAMPLE * SAMPLES as u32,
        }
    }
}

/// What [`QuotaManager::record`] counts for a request's time: percent of
/// one thread × seconds.
pub fn busy_percent_seconds(busy: Duration) -> f64 {
    busy.as_secs_f64() * 100.0
}

/// One measured entity's usage, for the metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaUsage {
    pub kind: QuotaKind,
    pub user: Option<String>,
    pub client_id: Option<String>,
    /// Bytes per second, or percent of one thread.
    pub rate: f64,
    /// Throttle time handed out so far.
    pub throttled: Duration,
}

/// A rate over a window of samples (Kafka's `Rate` with `SampledStat`);
/// the connection-rate quota uses it too.
#[derive(Debug)]
pub(crate) struct Sampler {
    /// (start, total) per sample, oldest first.
    samples: Vec<(Instant, f64)>,
    /// Throttle time handed out so far.
    throttled: Duration,
}

impl Sampler {
    pub(crate) fn new() -> Self {
        Sampler {
            samples: Vec::with_capacity(SAMPLES),
            throttled: Duration::ZERO,
        }
    }

    pub(crate) fn record(&mut self, now: Instant, value: f64) {
        match self.samples.last_mut() {
            Some((start, total)) if now.duration_since(*start) < SAMPLE => *total += value,
            _ => {
                if self.samples.len() == SAMPLES {
                    self.samples.remove(0);
                }
                self.samples.push((now, value));
            }
        }
        self.prune(now);
    }

    /// Forgets the samples older than the whole window.
    fn prune(&mut self, now: Instant) {
        let horizon = SAMPLE * SAMPLES as u32;
        self.samples
            .retain(|(start, _)| now.duration_since(*start) < horizon);
    }

    /// Nothing recorded for a whole window.
    pub(crate) fn idle(&self, now: Instant) -> bool {
        self.samples
            .last()
            .is_none_or(|(t, _)| now.duration_since(*t) >= SAMPLE * SAMPLES as u32)
    }

    /// The rate and window there would be with `value` recorded now
    /// (nothing is recorded: a refused connection does not count).
    pub(crate) fn rate_with(&mut self, now: Instant, value: f64) -> (f64, Duration) {
        self.prune(now);
        let total: f64 = self.samples.iter().map(|(_, v)| v).sum::<f64>() + value;
        let window = self.window(now);
        (total / window.as_secs_f64(), window)
    }

    /// The window the rate is measured over: from the oldest sample, and
    /// never shorter than all samples but one (a new client's first bytes
    /// are not a burst at an infinite rate).
    pub(crate) fn window(&self, now: Instant) -> Duration {
        let elapsed = self
            .samples
            .first()
            .map(|(start, _)| now.duration_since(*start))
            .unwrap_or_default();
        elapsed.max(SAMPLE * (SAMPLES as u32 - 1))
    }

    /// Kafka's `SimpleRate` over the same samples, which its remote-log
    /// quotas use: the window runs from the oldest sample and is at least
    /// one sample long (a burst counts at once, not over the whole window).
    pub(crate) fn simple_rate(&mut self, now: Instant) -> (f64, Duration) {
        self.prune(now);
        let total: f64 = self.samples.iter().map(|(_, v)| v).sum();
        let window = self
            .samples
            .first()
            .map(|(start, _)| now.duration_since(*start))
            .unwrap_or_default()
            .max(SAMPLE);
        (total / window.as_secs_f64(), window)
    }

    pub(crate) fn rate(&self, now: Instant) -> f64 {
        let total: f64 = self.samples.iter().map(|(_, v)| v).sum();
        total / self.window(now).as_secs_f64()
    }
}

/// Whose usage a quota measures: the user and/or client id named by the
/// parts of the entity that holds the quota.
pub type Measured = (Option<String>, Option<String>);

/// The quota that applies to (user, client id), and the key its usage is
/// measured under: the names of the parts the matched entity has (a quota
/// on the user alone is shared by all its clients; a default-user quota
/// is each user's own).
pub fn resolve(
    quotas: &ClientQuotas,
    key: &str,
    user: &str,
    client_id: &str,
) -> Option<(f64, Measured)> {
    use QuotaEntityType::{ClientId, User};
    let u = |n: Option<&str>| (User, n.map(str::to_string));
    let c = |n: Option<&str>| (ClientId, n.map(str::to_string));
    let candidates: [Vec<(QuotaEntityType, Option<String>)>; 8] = [
        vec![u(Some(user)), c(Some(client_id))],
        vec![u(Some(user)), c(None)],
        vec![u(Some(user))],
        vec![u(None), c(Some(client_id))],
        vec![u(None), c(None)],
        vec![u(None)],
        vec![c(Some(client_id))],
        vec![c(None)],
    ];
    candidates.into_iter().find_map(|parts| {
        let entity: QuotaEntity = parts.into_iter().collect();
        let value = quotas.get(&entity, key)?;
        let measured = (
            entity.contains_key(&User).then(|| user.to_string()),
            entity
                .contains_key(&ClientId)
                .then(|| client_id.to_string()),
        );
        Some((value, measured))
    })
}

/// Usage per (kind, measured entity).
#[derive(Default)]
pub struct QuotaManager {
    rates: Mutex<HashMap<(QuotaKind, Measured), Sampler>>,
    /// `skein_client_quota_throttle_seconds_total{quota,user,client_id}`.
    throttle_seconds: Option<prometheus::CounterVec>,
}

fn metric_labels(kind: QuotaKind, (user, client_id): &Measured) -> [&str; 3] {
    [
        kind.key(),
        user.as_deref().unwrap_or(""),
        client_id.as_deref().unwrap_or(""),
    ]
}

impl QuotaManager {
    /// A manager that exports each entity's throttle time in `registry`.
    pub fn new(registry: &prometheus::Registry) -> Self {
        let throttle_seconds = prometheus::CounterVec::new(
            prometheus::Opts::new(
                "skein_client_quota_throttle_seconds_total",
                "Throttle time handed to each client-quota entity (throttle_time_ms in responses, the connection muted for as long). user / client_id are empty when the quota is not per user / per client id.",
            ),
            &["quota", "user", "client_id"],
        )
        .expect("metric");
        registry
            .register(Box::new(throttle_seconds.clone()))
            .expect("register");
        QuotaManager {
            rates: Mutex::default(),
            throttle_seconds: Some(throttle_seconds),
        }
    }

    /// Forgets the entities idle for a whole window (and their metrics).
    fn forget_idle(&self, rates: &mut HashMap<(QuotaKind, Measured), Sampler>, now: Instant) {
        rates.retain(|(kind, measured), s| {
            let active = !s.idle(now);
            if !active {
                if let Some(m) = &self.throttle_seconds {
                    let _ = m.remove_label_values(&metric_labels(*kind, measured));
                }
            }
            active
        });
    }

    /// Counts `amount` (bytes, or [`busy_percent_seconds`]) for (user,
    /// client id) at `now` and returns how long to throttle (zero when within
    /// quota or without one).
    pub fn record(
        &self,
        quotas: &ClientQuotas,
        kind: QuotaKind,
        user: &str,
        client_id: &str,
        amount: f64,
        now: Instant,
    ) -> Duration {
        let Some((quota, (mu, mc))) = resolve(quotas, kind.key(), user, client_id) else {
            return Duration::ZERO;
        };
        let mut rates = self.rates.lock().expect("quota lock");
        if rates.len() > 100_000 {
            // Client ids are chosen by clients: forget idle ones rather
            // than grow without bound.
            self.forget_idle(&mut rates, now);
        }
        let measured = (mu, mc);
        if let Some(m) = &self.throttle_seconds {
            // Present (at zero) from the entity's first request.
            m.with_label_values(&metric_labels(kind, &measured));
        }
        let sampler = rates
            .entry((kind, measured.clone()))
            .or_insert_with(Sampler::new);
        sampler.record(now, amount);
        let rate = sampler.rate(now);
        if rate <= quota {
            return Duration::ZERO;
        }
        let window = sampler.window(now);
        let throttle = window
            .mul_f64((rate - quota) / quota)
            .min(kind.max_throttle());
        sampler.throttled += throttle;
        if let Some(m) = &self.throttle_seconds {
            m.with_label_values(&metric_labels(kind, &measured))
                .inc_by(throttle.as_secs_f64());
        }
        throttle
    }

    /// Every measured entity's current rate and throttle total (entities
    /// idle for a whole window are forgotten).
    pub fn usage(&self, now: Instant) -> Vec<QuotaUsage> {
        let mut rates = self.rates.lock().expect("quota lock");
        self.forget_idle(&mut rates, now);
        rates
            .iter()
            .map(|((kind, (user, client_id)), s)| QuotaUsage {
                kind: *kind,
                user: user.clone(),
                client_id: client_id.clone(),
                rate: s.rate(now),
                throttled: s.throttled,
            })
            .collect()
    }
}

/// What one request counts against the client's quotas.
pub struct Usage {
    /// A byte-rate quota and the request's size (a fetch counts its
    /// response's record bytes instead).
    pub bytes: Option<(QuotaKind, usize)>,
    /// The handler's time, unless the request is exempt.
    pub busy: Option<Duration>,
}

impl QuotaManager {
    /// Counts one request's usage for (user, client id) and returns how long
    /// to throttle it: the longest of the quotas' throttles.
    pub fn charge(
        &self,
        quotas: &ClientQuotas,
        user: &str,
        client_id: &str,
        usage: Usage,
        response: Option<&ResponseKind>,
    ) -> Duration {
        let now = Instant::now();
        let mut delay = Duration::ZERO;
        if let Some((kind, request_size)) = usage.bytes {
            let bytes = match (&kind, response) {
                (QuotaKind::Fetch, Some(ResponseKind::Fetch(f))) => f
                    .responses
                    .iter()
                    .flat_map(|t| t.partitions.iter())
                    .filter_map(|p| p.records.as_ref().map(|r| r.len()))
                    .sum(),
                _ => request_size,
            };
            delay = self.record(quotas, kind, user, client_id, bytes as f64, now);
        }
        if let Some(busy) = usage.busy {
            let amount = busy_percent_seconds(busy);
            delay =
                delay.max(self.record(quotas, QuotaKind::Request, user, client_id, amount, now));
        }
        delay
    }
}

/// Sets `throttle_time_ms` in a response that has one (an older version
/// that lacks the field simply does not carry it).
pub fn set_throttle_time(response: &mut ResponseKind, ms: i32) {
    use ResponseKind as R;
    macro_rules! set {
        ($($v:ident),* $(,)?) => {
            match response {
                $(R::$v(r) => r.throttle_time_ms = r.throttle_time_ms.max(ms),)*
                _ => {}
            }
        };
    }
    set!(
        Produce,
        Fetch,
        ListOffsets,
        Metadata,
        ApiVersions,
        CreateTopics,
        DeleteTopics,
        CreatePartitions,
        DescribeConfigs,
        AlterConfigs,
        IncrementalAlterConfigs,
        DescribeCluster,
        DescribeLogDirs,
        InitProducerId,
        FindCoordinator,
        DeleteRecords,
        OffsetForLeaderEpoch,
        JoinGroup,
        SyncGroup,
        Heartbeat,
        LeaveGroup,
        OffsetCommit,
        OffsetFetch,
        DescribeGroups,
        ListGroups,
        DeleteGroups,
        OffsetDelete,
        ConsumerGroupHeartbeat,
        ConsumerGroupDescribe,
        AlterPartitionReassignments,
        ListPartitionReassignments,
        ElectLeaders,
        DescribeUserScramCredentials,
        AlterUserScramCredentials,
        DescribeClientQuotas,
        AlterClientQuotas,
        CreateAcls,
        DescribeAcls,
        DeleteAcls,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use skein_controller::QuotaValue;

    type Parts<'a> = &'a [(QuotaEntityType, Option<&'a str>)];

    fn quotas(entries: &[(Parts<'_>, &str, f64)]) -> ClientQuotas {
        let mut q = ClientQuotas::default();
        for (parts, key, v) in entries {
            q.0.entry(
                parts
                    .iter()
                    .map(|(t, n)| (*t, n.map(str::to_string)))
                    .collect(),
            )
            .or_default()
            .insert(key.to_string(), QuotaValue(*v));
        }
        q
    }

    #[test]
    fn the_most_specific_entity_wins_in_kafkas_order() {
        use QuotaEntityType::{ClientId, User};
        let q = quotas(&[
            (&[(ClientId, None)], "producer_byte_rate", 8.0),
            (&[(User, None)], "producer_byte_rate", 6.0),
            (&[(User, Some("alice"))], "producer_byte_rate", 3.0),
            (
                &[(User, Some("alice")), (ClientId, Some("app"))],
                "producer_byte_rate",
                1.0,
            ),
        ]);
        let k = "producer_byte_rate";
        assert_eq!(
            resolve(&q, k, "alice", "app"),
            Some((1.0, (Some("alice".into()), Some("app".into()))))
        );
        assert_eq!(
            resolve(&q, k, "alice", "other"),
            Some((3.0, (Some("alice".into()), None)))
        );
        assert_eq!(
            resolve(&q, k, "bob", "app"),
            Some((6.0, (Some("bob".into()), None)))
        );
        assert_eq!(resolve(&q, "consumer_byte_rate", "bob", "app"), None);
        let only_clients = quotas(&[(&[(ClientId, None)], k, 8.0)]);
        assert_eq!(
            resolve(&only_clients, k, "bob", "app"),
            Some((8.0, (None, Some("app".into()))))
        );
    }

    #[test]
    fn a_client_over_its_quota_is_throttled_back_to_it() {
        let q = quotas(&[(
            &[(QuotaEntityType::User, None)],
            "producer_byte_rate",
            1000.0,
        )]);
        let m = QuotaManager::default();
        let start = Instant::now();
        // A client sending 200-byte requests as fast as it is let: after
        // the first window (which may burst), its throttles keep the
        // average at the quota.
        let mut t = start;
        let mut sent_late = 0usize;
        let late = start + Duration::from_secs(30);
        while t < start + Duration::from_secs(120) {
            if t >= late {
                sent_late += 200;
            }
            let throttle = m.record(&q, QuotaKind::Produce, "u", "c", 200.0, t);
            t += throttle.max(Duration::from_millis(1));
        }
        let rate = sent_late as f64 / t.duration_since(late).as_secs_f64();
        assert!(
            (900.0..=1100.0).contains(&rate),
            "{rate} B/s against a quota of 1000"
        );
        // No quota, no throttle.
        let none = ClientQuotas::default();
        assert_eq!(
            m.record(&none, QuotaKind::Produce, "u", "c", 1e9, Instant::now()),
            Duration::ZERO
        );
    }

    #[test]
    fn request_time_is_held_to_its_share_of_a_thread_in_throttles_of_at_most_a_second() {
        let q = quotas(&[(
            &[(QuotaEntityType::ClientId, Some("busy"))],
            "request_percentage",
            10.0,
        )]);
        let registry = prometheus::Registry::new();
        let m = QuotaManager::new(&registry);
        let start = Instant::now();
        // Each request keeps the broker busy for 20 ms; unthrottled the
        // client would use 100 % of a thread.
        let work = Duration::from_millis(20);
        let (mut t, mut busy_late) = (start, Duration::ZERO);
        let late = start + Duration::from_secs(30);
        let mut longest = Duration::ZERO;
        while t < start + Duration::from_secs(120) {
            if t >= late {
                busy_late += work;
            }
            let throttle = m.record(
                &q,
                QuotaKind::Request,
                "ANONYMOUS",
                "busy",
                busy_percent_seconds(work),
                t,
            );
            longest = longest.max(throttle);
            t += work + throttle;
        }
        let share = 100.0 * busy_late.as_secs_f64() / t.duration_since(late).as_secs_f64();
        assert!(
            (9.0..=11.0).contains(&share),
            "{share} % against a quota of 10 %"
        );
        assert!(
            longest > Duration::ZERO && longest <= Duration::from_secs(1),
            "{longest:?}"
        );
        // Another client id has no quota.
        assert_eq!(
            m.record(&q, QuotaKind::Request, "ANONYMOUS", "other", 1e6, t),
            Duration::ZERO
        );
        let usage = m.usage(t);
        assert_eq!(usage.len(), 1, "{usage:?}");
        let u = &usage[0];
        assert_eq!(
            (u.kind, u.user.as_deref(), u.client_id.as_deref()),
            (QuotaKind::Request, None, Some("busy"))
        );
        assert!((8.0..=12.0).contains(&u.rate), "{u:?}");
        assert!(u.throttled > Duration::from_secs(60), "{u:?}");
        let exported = |registry: &prometheus::Registry| {
            registry
                .gather()
                .iter()
                .flat_map(|f| f.get_metric().to_vec())
                .map(|m| m.get_counter().get_value())
                .collect::<Vec<_>>()
        };
        let counted = exported(&registry);
        assert_eq!(counted.len(), 1, "{counted:?}");
        assert!((counted[0] - u.throttled.as_secs_f64()).abs() < 1e-6);
        // Idle for a whole window: forgotten, metric too.
        assert!(m.usage(t + Duration::from_secs(12)).is_empty());
        assert!(exported(&registry).is_empty());
    }
}
