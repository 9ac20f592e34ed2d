//! Client quota enforcement, as Kafka's `ClientQuotaManager` does it: each
//! produce request's size and each consumer fetch response's size count
//! against the quota of the most specific entity that has one (user and
//! client id, then the user with the default client, the user, the default
//! user with the client, …, the default client id). Over the quota, the
//! response carries `throttle_time_ms` and the connection is muted for that
//! long (KIP-219): the client waits too, and no error is ever returned.
//!
//! Rates are measured over 11 one-second samples (`quota.window.num`,
//! `quota.window.size.seconds`); a client over its quota is throttled for
//! `(rate - quota) / quota × window`, at most the whole window (11 s), so its average
//! comes back to the quota.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use skein_controller::{ClientQuotas, QuotaEntity, QuotaEntityType};

/// Samples per rate and the length of one.
const SAMPLES: usize = 11;
const SAMPLE: Duration = Duration::from_secs(1);

/// Which quota a request counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    Produce,
    Fetch,
}

impl QuotaKind {
    pub fn key(self) -> &'static str {
        match self {
            QuotaKind::Produce => "producer_byte_rate",
            QuotaKind::Fetch => "consumer_byte_rate",
        }
    }
}

/// A rate over a window of samples (Kafka's `Rate` with `SampledStat`).
#[derive(Debug)]
struct Sampler {
    /// (start, total) per sample, oldest first.
    samples: Vec<(Instant, f64)>,
}

impl Sampler {
    fn new() -> Self {
        Sampler {
            samples: Vec::with_capacity(SAMPLES),
        }
    }

    fn record(&mut self, now: Instant, value: f64) {
        match self.samples.last_mut() {
            Some((start, total)) if now.duration_since(*start) < SAMPLE => *total += value,
            _ => {
                if self.samples.len() == SAMPLES {
                    self.samples.remove(0);
                }
                self.samples.push((now, value));
            }
        }
        let horizon = SAMPLE * SAMPLES as u32;
        self.samples
            .retain(|(start, _)| now.duration_since(*start) < horizon);
    }

    /// The window the rate is measured over: from the oldest sample, and
    /// never shorter than all samples but one (a new client's first bytes
    /// are not a burst at an infinite rate).
    fn window(&self, now: Instant) -> Duration {
        let elapsed = self
            .samples
            .first()
            .map(|(start, _)| now.duration_since(*start))
            .unwrap_or_default();
        elapsed.max(SAMPLE * (SAMPLES as u32 - 1))
    }

    fn rate(&self, now: Instant) -> f64 {
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
}

impl QuotaManager {
    /// Counts `bytes` for (user, client id) at `now` and returns how long
    /// to throttle (zero when within quota or without one).
    pub fn record(
        &self,
        quotas: &ClientQuotas,
        kind: QuotaKind,
        user: &str,
        client_id: &str,
        bytes: usize,
        now: Instant,
    ) -> Duration {
        let Some((quota, (mu, mc))) = resolve(quotas, kind.key(), user, client_id) else {
            return Duration::ZERO;
        };
        let mut rates = self.rates.lock().expect("quota lock");
        if rates.len() > 100_000 {
            // Client ids are chosen by clients: forget idle ones rather
            // than grow without bound.
            rates.retain(|_, s| {
                s.samples
                    .last()
                    .is_some_and(|(t, _)| now.duration_since(*t) < SAMPLE * SAMPLES as u32)
            });
        }
        let sampler = rates.entry((kind, (mu, mc))).or_insert_with(Sampler::new);
        sampler.record(now, bytes as f64);
        let rate = sampler.rate(now);
        if rate <= quota {
            return Duration::ZERO;
        }
        let window = sampler.window(now);
        let throttle = window.mul_f64((rate - quota) / quota);
        throttle.min(SAMPLE * SAMPLES as u32)
    }
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
            let throttle = m.record(&q, QuotaKind::Produce, "u", "c", 200, t);
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
            m.record(&none, QuotaKind::Produce, "u", "c", 1 << 30, Instant::now()),
            Duration::ZERO
        );
    }
}
