//! Leader election with a `coordination.k8s.io/v1` Lease, so two operator
//! replicas can run with one active. Only the holder reconciles (and so
//! writes status). Updates carry the Lease's resourceVersion, making every
//! acquire or renew a compare-and-swap.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use kube::Client;
use tracing::{info, warn};

/// Lease settings.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    pub name: String,
    pub namespace: String,
    /// This replica's identity (its pod name).
    pub identity: String,
    /// How long a lease stays valid without renewal.
    pub lease_duration: Duration,
    /// How often the holder renews (well under `lease_duration`).
    pub renew_every: Duration,
}

/// What to do with the Lease as it is now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// No Lease object yet: create it, held by us.
    Create,
    /// We hold it: renew.
    Renew,
    /// Nobody holds it or the holder's lease expired: take it.
    TakeOver,
    /// Someone else holds a live lease.
    Wait { holder: String },
}

/// Decides from the current Lease spec (`None` when there is no Lease).
pub fn decide(lease: Option<&LeaseSpec>, identity: &str, now: Timestamp) -> Decision {
    let Some(spec) = lease else {
        return Decision::Create;
    };
    let holder = spec.holder_identity.as_deref().unwrap_or("");
    if holder == identity {
        return Decision::Renew;
    }
    if holder.is_empty() {
        return Decision::TakeOver;
    }
    let duration = SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(15)));
    let last = spec
        .renew_time
        .as_ref()
        .or(spec.acquire_time.as_ref())
        .map(|t| t.0);
    match last {
        Some(t) if t + duration > now => Decision::Wait {
            holder: holder.to_string(),
        },
        _ => Decision::TakeOver,
    }
}

/// The Lease spec after acting on `decision` at `now`.
pub fn next_spec(
    previous: Option<&LeaseSpec>,
    decision: &Decision,
    cfg: &LeaseConfig,
    now: Timestamp,
) -> LeaseSpec {
    let duration = i32::try_from(cfg.lease_duration.as_secs()).unwrap_or(i32::MAX);
    match decision {
        Decision::Renew => LeaseSpec {
            renew_time: Some(MicroTime(now)),
            lease_duration_seconds: Some(duration),
            ..previous.cloned().unwrap_or_default()
        },
        _ => LeaseSpec {
            holder_identity: Some(cfg.identity.clone()),
            acquire_time: Some(MicroTime(now)),
            renew_time: Some(MicroTime(now)),
            lease_duration_seconds: Some(duration),
            lease_transitions: Some(match previous {
                None => 0,
                Some(p) => p.lease_transitions.unwrap_or(0) + 1,
            }),
            ..LeaseSpec::default()
        },
    }
}

/// Acquires and renews the Lease.
pub struct LeaderElector {
    api: Api<Lease>,
    cfg: LeaseConfig,
}

impl LeaderElector {
    pub fn new(client: Client, cfg: LeaseConfig) -> Self {
        LeaderElector {
            api: Api::namespaced(client, &cfg.namespace),
            cfg,
        }
    }

    /// One attempt: `Ok(true)` when we hold the Lease afterwards.
    pub async fn try_acquire_or_renew(&self, now: Timestamp) -> Result<bool, kube::Error> {
        let current = self.api.get_opt(&self.cfg.name).await?;
        let decision = decide(
            current.as_ref().and_then(|l| l.spec.as_ref()),
            &self.cfg.identity,
            now,
        );
        let result = match (&decision, current) {
            (Decision::Wait { .. }, _) => return Ok(false),
            (Decision::Create, _) | (_, None) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.cfg.name.clone()),
                        namespace: Some(self.cfg.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(next_spec(None, &Decision::Create, &self.cfg, now)),
                };
                self.api.create(&PostParams::default(), &lease).await
            }
            (_, Some(mut lease)) => {
                if decision == Decision::TakeOver {
                    info!(identity = %self.cfg.identity, "taking over the leader lease");
                }
                lease.spec = Some(next_spec(lease.spec.as_ref(), &decision, &self.cfg, now));
                // resourceVersion stays set: a concurrent writer makes this a 409.
                self.api
                    .replace(&self.cfg.name, &PostParams::default(), &lease)
                    .await
            }
        };
        match result {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Waits until this replica holds the Lease.
    pub async fn acquire(&self) {
        loop {
            match self.try_acquire_or_renew(Timestamp::now()).await {
                Ok(true) => {
                    info!(identity = %self.cfg.identity, lease = %self.cfg.name, "became leader");
                    return;
                }
                Ok(false) => {}
                Err(e) => warn!(error = %e, "leader election"),
            }
            tokio::time::sleep(self.cfg.renew_every).await;
        }
    }

    /// Renews until the Lease is lost (or cannot be renewed within its
    /// duration), then returns: the caller must stop acting as leader.
    pub async fn hold(&self) {
        let mut last_renewed = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.cfg.renew_every).await;
            match self.try_acquire_or_renew(Timestamp::now()).await {
                Ok(true) => last_renewed = tokio::time::Instant::now(),
                Ok(false) => {
                    warn!("lost the leader lease to another replica");
                    return;
                }
                Err(e) => warn!(error = %e, "renewing the leader lease"),
            }
            if last_renewed.elapsed() >= self.cfg.lease_duration {
                warn!("could not renew the leader lease in time");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> LeaseConfig {
        LeaseConfig {
            name: "skein-operator".into(),
            namespace: "skein-system".into(),
            identity: "op-a".into(),
            lease_duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
        }
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn held_by(holder: &str, renewed: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            acquire_time: Some(MicroTime(at(0))),
            renew_time: Some(MicroTime(at(renewed))),
            lease_duration_seconds: Some(15),
            lease_transitions: Some(2),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn no_lease_is_created() {
        assert_eq!(decide(None, "op-a", at(0)), Decision::Create);
        let spec = next_spec(None, &Decision::Create, &cfg(), at(0));
        assert_eq!(spec.holder_identity.as_deref(), Some("op-a"));
        assert_eq!(spec.lease_transitions, Some(0));
    }

    #[test]
    fn our_lease_is_renewed_keeping_acquire_time() {
        let lease = held_by("op-a", 5);
        assert_eq!(decide(Some(&lease), "op-a", at(8)), Decision::Renew);
        let spec = next_spec(Some(&lease), &Decision::Renew, &cfg(), at(8));
        assert_eq!(spec.acquire_time, lease.acquire_time);
        assert_eq!(spec.renew_time, Some(MicroTime(at(8))));
        assert_eq!(spec.lease_transitions, Some(2));
    }

    #[test]
    fn a_live_lease_of_another_replica_is_respected() {
        let lease = held_by("op-b", 5);
        assert_eq!(
            decide(Some(&lease), "op-a", at(19)),
            Decision::Wait {
                holder: "op-b".into()
            }
        );
    }

    #[test]
    fn an_expired_lease_is_taken_over_with_a_new_transition() {
        let lease = held_by("op-b", 5);
        assert_eq!(decide(Some(&lease), "op-a", at(20)), Decision::TakeOver);
        let spec = next_spec(Some(&lease), &Decision::TakeOver, &cfg(), at(20));
        assert_eq!(spec.holder_identity.as_deref(), Some("op-a"));
        assert_eq!(spec.acquire_time, Some(MicroTime(at(20))));
        assert_eq!(spec.lease_transitions, Some(3));
    }

    #[test]
    fn a_released_lease_is_taken_over() {
        let mut lease = held_by("op-b", 5);
        lease.holder_identity = None;
        assert_eq!(decide(Some(&lease), "op-a", at(6)), Decision::TakeOver);
    }
}
