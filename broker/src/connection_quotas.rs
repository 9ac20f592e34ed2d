//! Connection limits, as Kafka's `ConnectionQuotas`:
//!
//! - `max.connections.per.ip` (and `max.connections.per.ip.overrides`,
//!   `host:count,…`): a connection beyond an address's limit is closed at
//!   once.
//! - `max.connections`: beyond it the listener stops accepting until a
//!   connection closes (clients wait in the kernel's backlog). The
//!   inter-broker listener is not limited by it, so replication never
//!   starves; the per-address limits apply to every listener, as in Kafka.
//! - the `ips` entity's `connection_creation_rate` (`kafka-configs
//!   --entity-type ips`, KIP-612): a new connection from an address over its
//!   rate is held unread for the throttle time, then closed, and is not
//!   counted against the rate.
//!
//! Refusals are counted in `skein_connections_refused_total{listener,reason}`.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use skein_controller::{ClientQuotas, QuotaEntity, QuotaEntityType};

use crate::quotas::Sampler;
use skein_controller::broker_config as keys;

/// The connection-rate window (11 one-second samples, as the client
/// quotas' `quota.window.*`).
const WINDOW: Duration = Duration::from_secs(11);

/// The static limits from the broker config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionLimits {
    pub per_ip: u32,
    pub per_ip_overrides: HashMap<IpAddr, u32>,
    pub max_connections: Option<u32>,
    /// `max.connections` was not set: the broker's start-up derives it from
    /// the open-files limit ([`crate::system::default_max_connections`]).
    pub max_connections_unset: bool,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            per_ip: u32::MAX,
            per_ip_overrides: HashMap::new(),
            max_connections: None,
            max_connections_unset: true,
        }
    }
}

/// A connection-limit setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid value {value:?} for {key}: {reason}")]
pub struct InvalidLimit {
    pub key: String,
    pub value: String,
    pub reason: String,
}

fn invalid(key: &str, value: &str, reason: impl Into<String>) -> InvalidLimit {
    InvalidLimit {
        key: key.into(),
        value: value.into(),
        reason: reason.into(),
    }
}

fn count(key: &str, v: &str) -> Result<u32, InvalidLimit> {
    let n: i64 = v
        .trim()
        .parse()
        .map_err(|_| invalid(key, v, "not a number"))?;
    if n < 0 {
        return Err(invalid(key, v, "must be at least 0"));
    }
    Ok(n.min(u32::MAX as i64) as u32)
}

impl ConnectionLimits {
    /// Reads `max.connections.per.ip`, `max.connections.per.ip.overrides`
    /// and `max.connections`. Override hosts are resolved once, here.
    pub fn from_config(raw: &BTreeMap<String, String>) -> Result<Self, InvalidLimit> {
        let mut limits = ConnectionLimits::default();
        if let Some(v) = raw.get(keys::MAX_CONNECTIONS_PER_IP.name) {
            limits.per_ip = count(keys::MAX_CONNECTIONS_PER_IP.name, v)?;
        }
        let key = keys::MAX_CONNECTIONS_PER_IP_OVERRIDES.name;
        if let Some(v) = raw.get(key).filter(|v| !v.trim().is_empty()) {
            for entry in v.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                let (host, n) = entry
                    .rsplit_once(':')
                    .ok_or_else(|| invalid(key, v, format!("{entry:?} is not host:count")))?;
                let n = count(key, n)?;
                let ips: Vec<IpAddr> = match host.parse::<IpAddr>() {
                    Ok(ip) => vec![ip],
                    Err(_) => (host, 0)
                        .to_socket_addrs()
                        .map_err(|e| invalid(key, v, format!("cannot resolve {host}: {e}")))?
                        .map(|a| a.ip())
                        .collect(),
                };
                for ip in ips {
                    limits.per_ip_overrides.insert(ip, n);
                }
            }
        }
        if let Some(v) = raw.get(keys::MAX_CONNECTIONS.name) {
            let n = count(keys::MAX_CONNECTIONS.name, v)?;
            limits.max_connections = (n < i32::MAX as u32).then_some(n);
            limits.max_connections_unset = false;
        }
        if limits.per_ip == 0 && limits.per_ip_overrides.is_empty() {
            return Err(invalid(
                keys::MAX_CONNECTIONS_PER_IP.name,
                "0",
                "0 needs max.connections.per.ip.overrides (no one could connect)",
            ));
        }
        Ok(limits)
    }

    fn limit_for(&self, ip: &IpAddr) -> u32 {
        self.per_ip_overrides
            .get(ip)
            .copied()
            .unwrap_or(self.per_ip)
    }
}

/// Why a new connection is not served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `max.connections.per.ip`: closed at once.
    TooManyFromIp,
    /// The address's `connection_creation_rate`: held for this long, then
    /// closed.
    RateThrottled(Duration),
}

impl Refusal {
    pub fn label(&self) -> &'static str {
        match self {
            Refusal::TooManyFromIp => "max_connections_per_ip",
            Refusal::RateThrottled(_) => "connection_creation_rate",
        }
    }
}

/// Open connections and connection rates per address.
pub struct ConnectionQuotas {
    limits: ConnectionLimits,
    /// `max.connections`, shared by the limited listeners.
    pub slots: Option<Arc<tokio::sync::Semaphore>>,
    open: Mutex<HashMap<IpAddr, u32>>,
    /// Connections per second, per address.
    rates: Mutex<HashMap<IpAddr, Sampler>>,
}

/// One admitted connection; dropping it gives its place back.
pub struct Admitted {
    quotas: Arc<ConnectionQuotas>,
    ip: IpAddr,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut open = self.quotas.open.lock().expect("connections lock");
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// The `connection_creation_rate` for `ip`: its own entity, else the
/// default ip entity.
fn rate_quota(quotas: &ClientQuotas, ip: &IpAddr) -> Option<f64> {
    let entity = |name: Option<String>| -> QuotaEntity {
        [(QuotaEntityType::Ip, name)].into_iter().collect()
    };
    quotas
        .get(&entity(Some(ip.to_string())), "connection_creation_rate")
        .or_else(|| quotas.get(&entity(None), "connection_creation_rate"))
}

impl ConnectionQuotas {
    pub fn new(limits: ConnectionLimits) -> Arc<Self> {
        let slots = limits
            .max_connections
            .map(|n| Arc::new(tokio::sync::Semaphore::new(n as usize)));
        Arc::new(ConnectionQuotas {
            limits,
            slots,
            open: Mutex::default(),
            rates: Mutex::default(),
        })
    }

    /// Admits a new connection from `ip` or says why not.
    pub fn admit(
        self: &Arc<Self>,
        ip: IpAddr,
        quotas: &ClientQuotas,
        now: Instant,
    ) -> Result<Admitted, Refusal> {
        {
            let mut open = self.open.lock().expect("connections lock");
            let n = open.entry(ip).or_insert(0);
            if *n >= self.limits.limit_for(&ip) {
                if *n == 0 {
                    open.remove(&ip);
                }
                return Err(Refusal::TooManyFromIp);
            }
            *n += 1;
        }
        let admitted = Admitted {
            quotas: self.clone(),
            ip,
        };
        if let Some(quota) = rate_quota(quotas, &ip) {
            let throttle = self.record_rate(ip, quota, now);
            if !throttle.is_zero() {
                return Err(Refusal::RateThrottled(throttle));
            }
        }
        Ok(admitted)
    }

    /// Counts a connection from `ip` against `quota` connections/s; over
    /// it, the connection is not counted and the throttle time returned.
    fn record_rate(&self, ip: IpAddr, quota: f64, now: Instant) -> Duration {
        if quota <= 0.0 {
            return Duration::from_secs(1);
        }
        let mut rates = self.rates.lock().expect("rates lock");
        if rates.len() > 10_000 {
            rates.retain(|_, s| !s.idle(now));
        }
        let sampler = rates.entry(ip).or_insert_with(Sampler::new);
        let (rate, window) = sampler.rate_with(now, 1.0);
        if rate > quota {
            // Kafka: throttle = (rate - quota) / quota × window, the
            // connection not recorded.
            return window
                .mul_f64((rate - quota) / quota)
                .clamp(Duration::from_millis(1), WINDOW);
        }
        sampler.record(now, 1.0);
        Duration::ZERO
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skein_controller::QuotaValue;

    fn raw(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn config_is_read_as_kafka_writes_it() {
        let l = ConnectionLimits::from_config(&raw(&[
            ("max.connections.per.ip", "2"),
            (
                "max.connections.per.ip.overrides",
                "127.0.0.2:5, localhost:7",
            ),
            ("max.connections", "100"),
        ]))
        .unwrap();
        assert_eq!(l.per_ip, 2);
        assert_eq!(l.limit_for(&"127.0.0.2".parse().unwrap()), 5);
        assert_eq!(l.limit_for(&"127.0.0.1".parse().unwrap()), 7);
        assert_eq!(l.limit_for(&"10.0.0.1".parse().unwrap()), 2);
        assert_eq!(l.max_connections, Some(100));
        assert_eq!(
            ConnectionLimits::from_config(&raw(&[])).unwrap(),
            ConnectionLimits::default()
        );
        for bad in [
            ("max.connections.per.ip", "-1"),
            ("max.connections.per.ip.overrides", "nocount"),
            ("max.connections", "many"),
            ("max.connections.per.ip", "0"),
        ] {
            assert!(
                ConnectionLimits::from_config(&raw(&[bad])).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn an_address_over_its_limit_is_refused_until_one_of_its_connections_closes() {
        let q = ConnectionQuotas::new(ConnectionLimits {
            per_ip: 2,
            ..ConnectionLimits::default()
        });
        let none = ClientQuotas::default();
        let (a, b) = ("127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap());
        let now = Instant::now();
        let first = q.admit(a, &none, now).unwrap();
        let _second = q.admit(a, &none, now).unwrap();
        assert_eq!(q.admit(a, &none, now).err(), Some(Refusal::TooManyFromIp));
        let _other = q.admit(b, &none, now).unwrap();
        drop(first);
        assert!(q.admit(a, &none, now).is_ok());
    }

    #[test]
    fn connection_creation_rate_holds_an_address_to_its_rate() {
        let q = ConnectionQuotas::new(ConnectionLimits::default());
        let mut quotas = ClientQuotas::default();
        quotas
            .0
            .entry([(QuotaEntityType::Ip, None)].into_iter().collect())
            .or_default()
            .insert("connection_creation_rate".into(), QuotaValue(5.0));
        let ip: IpAddr = "127.0.0.9".parse().unwrap();
        let start = Instant::now();
        // A client reconnecting every 10 ms for a minute, waiting out each
        // throttle: about 5 connections a second get through.
        let (mut t, mut admitted) = (start, 0u32);
        while t < start + Duration::from_secs(60) {
            match q.admit(ip, &quotas, t) {
                Ok(_conn) => admitted += 1,
                Err(Refusal::RateThrottled(d)) => t += d,
                Err(e) => panic!("{e:?}"),
            }
            t += Duration::from_millis(10);
        }
        let rate = admitted as f64 / 60.0;
        assert!(
            (4.0..=6.5).contains(&rate),
            "{rate} connections/s against 5"
        );
        // Another address has its own budget.
        assert!(q.admit("127.0.0.10".parse().unwrap(), &quotas, t).is_ok());
    }
}
