//! A certificate authority of the client listeners and its life: renewal
//! before it expires, and the replacement of its key in phases that never
//! leave a client or a broker trusting nothing that is served.
//!
//! A CA the operator made lives in a Secret (`<cluster>-cluster-ca`,
//! `<cluster>-clients-ca`):
//!
//! - `ca.crt`, `ca.key`: the CA that signs;
//! - `next-ca.crt`, `next-ca.key`: while a replacement is in its **trust**
//!   phase, the new CA: trusted next to the signing one, signing nothing;
//! - `old-ca.crt`: while a replacement is in its **replace** phase, the
//!   previous CA: still trusted while what it signed is replaced;
//! - annotation `skein.dev/ca-phase-since`: when the phase began (Unix
//!   seconds).
//!
//! What trusts the CA (clients through `<cluster>-cluster-ca-cert`, brokers
//! through `clients-ca.crt` of their listener Secret) gets the *bundle*: the
//! signing certificate and the next or old one. Each phase lasts at least
//! the operator's `--ca-phase-seconds`: the time for kubelets to update the
//! mounted Secrets, brokers to reload them, and clients to take the bundle.
//!
//! Renewal keeps the key: a new certificate with the same subject and key,
//! so a client trusting the old certificate verifies what the renewed one
//! signs (trust anchors are matched by name and key).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;

use crate::local_tls::{ca_valid, Validity};

pub const CERT_KEY: &str = "ca.crt";
pub const PRIVATE_KEY: &str = "ca.key";
const NEXT_CERT_KEY: &str = "next-ca.crt";
const NEXT_PRIVATE_KEY: &str = "next-ca.key";
const OLD_CERT_KEY: &str = "old-ca.crt";
/// cert-manager's names of a CA Secret's certificate and key.
const TLS_CERT_KEY: &str = "tls.crt";
const TLS_PRIVATE_KEY: &str = "tls.key";
/// Annotation on a CA Secret: when its rollover phase began.
pub const PHASE_SINCE_ANNOTATION: &str = "skein.dev/ca-phase-since";
/// Annotations on a KafkaCluster asking for a renewal or a replacement:
/// `cluster`, `clients` or both (comma separated). Removed once done.
pub const FORCE_RENEW_ANNOTATION: &str = "skein.dev/force-renew-ca";
pub const FORCE_REPLACE_ANNOTATION: &str = "skein.dev/force-replace-ca";

/// Seconds in a day.
pub const DAY: i64 = 86_400;

/// A CA's certificate and key, as PEM.
#[derive(Clone, Debug, PartialEq)]
pub struct Ca {
    pub cert: String,
    pub key: String,
}

/// Where a replacement is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Steady,
    /// The next CA is trusted, the current one signs.
    Trust,
    /// The new CA signs, the old one is still trusted.
    Replace,
}

/// A CA as its Secret holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct CaState {
    pub signer: Ca,
    pub next: Option<Ca>,
    pub old: Option<String>,
    pub phase_since: Option<i64>,
}

/// What a [`CaState::step`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Made anew (there was none).
    Made,
    /// A new certificate with the same key.
    Renewed,
    /// A new key, trusted next to the current one.
    TrustingNext,
    /// The new key signs; the old one is still trusted.
    Promoted,
    /// The old key is trusted no more.
    DroppedOld,
}

/// What was asked of a CA by annotation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Request {
    pub renew: bool,
    pub replace: bool,
}

/// How the operator times certificates: the shortest phase of a CA
/// replacement, and the length of a day of `validityDays` and
/// `renewalDays`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    pub phase: Duration,
    pub day: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            phase: Duration::from_secs(300),
            day: Duration::from_secs(DAY as u64),
        }
    }
}

/// How certificates are issued and renewed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    pub validity_days: i64,
    pub renewal_days: i64,
    /// Seconds in a day of `validity_days` and `renewal_days`: 86 400, or
    /// fewer to test rotation on a short clock
    /// (`--certificate-day-seconds`).
    pub day: i64,
    pub phase: Duration,
    /// Unix seconds.
    pub now: i64,
}

impl Policy {
    /// The validity of a certificate issued now (from an hour back: clocks
    /// of clients and brokers drift).
    pub fn validity(&self) -> Validity {
        Validity {
            not_before: self.now - 3600,
            not_after: self.now + self.validity_days * self.day,
        }
    }

    /// Whether a certificate (PEM; the first one) is due for renewal:
    /// expires within `renewal_days`, or cannot be read.
    pub fn due(&self, cert_pem: &str) -> bool {
        self.renewal_in(cert_pem).is_zero()
    }

    /// How long until a certificate (PEM; the first one) falls due for
    /// renewal: zero when it is due already or cannot be read.
    pub fn renewal_in(&self, cert_pem: &str) -> Duration {
        let left = not_after(cert_pem)
            .map_or(0, |t| t - self.renewal_days * self.day - self.now)
            .max(0);
        Duration::from_secs(left as u64)
    }
}

/// When the first certificate of `pem` expires (Unix seconds); a key
/// before it (a keystore) is skipped.
pub fn not_after(pem: &str) -> Option<i64> {
    let from = pem.find("-----BEGIN CERTIFICATE-----")?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(&pem.as_bytes()[from..]).ok()?;
    let cert = pem.parse_x509().ok()?;
    Some(cert.validity().not_after.timestamp())
}

/// Whether the first certificates of `a` and `b` (PEM) hold the same public
/// key: then they are one CA, whatever their subjects, for what one key
/// signs the other verifies. Unreadable certificates are not the same.
pub fn same_key(a: &str, b: &str) -> bool {
    fn spki(pem: &str) -> Option<Vec<u8>> {
        let from = pem.find("-----BEGIN CERTIFICATE-----")?;
        let (_, pem) = x509_parser::pem::parse_x509_pem(&pem.as_bytes()[from..]).ok()?;
        let cert = pem.parse_x509().ok()?;
        Some(cert.public_key().raw.to_vec())
    }
    matches!((spki(a), spki(b)), (Some(x), Some(y)) if x == y)
}

/// A Secret's value as text (`None`: absent or not UTF-8).
pub(crate) fn text(secret: &Secret, key: &str) -> Option<String> {
    let bytes = secret.data.as_ref()?.get(key)?;
    String::from_utf8(bytes.0.clone()).ok()
}

impl Ca {
    /// A CA an administrator brings: `ca.crt`/`ca.key` or cert-manager's
    /// `tls.crt`/`tls.key`.
    pub fn brought(secret: &Secret) -> Option<Self> {
        let pair = |c, k| {
            Some(Ca {
                cert: text(secret, c)?,
                key: text(secret, k)?,
            })
        };
        pair(CERT_KEY, PRIVATE_KEY).or_else(|| pair(TLS_CERT_KEY, TLS_PRIVATE_KEY))
    }

    fn made(cn: &str, key: Option<&str>, policy: &Policy) -> Result<Self, rcgen::Error> {
        let (cert, key) = ca_valid(cn, key, policy.validity())?;
        Ok(Ca { cert, key })
    }
}

impl CaState {
    /// A new CA named `cn`.
    pub fn new(cn: &str, policy: &Policy) -> Result<Self, rcgen::Error> {
        Ok(CaState {
            signer: Ca::made(cn, None, policy)?,
            next: None,
            old: None,
            phase_since: None,
        })
    }

    /// A CA the administrator brings: it signs, and is all that is trusted.
    pub fn brought(ca: Ca) -> Self {
        CaState {
            signer: ca,
            next: None,
            old: None,
            phase_since: None,
        }
    }

    /// The state in a CA Secret the operator wrote.
    pub fn read(secret: &Secret) -> Option<Self> {
        let next = match (text(secret, NEXT_CERT_KEY), text(secret, NEXT_PRIVATE_KEY)) {
            (Some(cert), Some(key)) => Some(Ca { cert, key }),
            _ => None,
        };
        Some(CaState {
            signer: Ca {
                cert: text(secret, CERT_KEY)?,
                key: text(secret, PRIVATE_KEY)?,
            },
            next,
            old: text(secret, OLD_CERT_KEY),
            phase_since: secret
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(PHASE_SINCE_ANNOTATION))
                .and_then(|s| s.parse().ok()),
        })
    }

    /// The Secret's data and annotations for this state.
    pub fn secret_parts(&self) -> (Vec<(&'static str, String)>, BTreeMap<String, String>) {
        let mut data = vec![
            (CERT_KEY, self.signer.cert.clone()),
            (PRIVATE_KEY, self.signer.key.clone()),
        ];
        if let Some(next) = &self.next {
            data.push((NEXT_CERT_KEY, next.cert.clone()));
            data.push((NEXT_PRIVATE_KEY, next.key.clone()));
        }
        if let Some(old) = &self.old {
            data.push((OLD_CERT_KEY, old.clone()));
        }
        let annotations = self
            .phase_since
            .map(|t| BTreeMap::from([(PHASE_SINCE_ANNOTATION.to_string(), t.to_string())]))
            .unwrap_or_default();
        (data, annotations)
    }

    pub fn phase(&self) -> Phase {
        match (&self.next, &self.old) {
            (Some(_), _) => Phase::Trust,
            (None, Some(_)) => Phase::Replace,
            (None, None) => Phase::Steady,
        }
    }

    /// Every certificate to trust: the signing one, then the next or old.
    pub fn bundle(&self) -> String {
        let mut b = self.signer.cert.clone();
        for extra in [self.next.as_ref().map(|n| &n.cert), self.old.as_ref()]
            .into_iter()
            .flatten()
        {
            if !b.ends_with('\n') {
                b.push('\n');
            }
            b.push_str(extra);
        }
        b
    }

    /// How long until the current phase may end (`None`: steady).
    pub fn phase_left(&self, policy: &Policy) -> Option<Duration> {
        if self.phase() == Phase::Steady {
            return None;
        }
        let since = self.phase_since.unwrap_or(policy.now);
        let left = since + policy.phase.as_secs() as i64 - policy.now;
        Some(Duration::from_secs(left.max(0) as u64))
    }

    /// One step of the CA's life at `policy.now`: the next phase of a
    /// replacement once the current one has lasted long enough; else, when
    /// steady, a replacement or renewal asked for, or a renewal due. The
    /// second value: whether `request` was acted on (a request during a
    /// replacement waits for it to end).
    pub fn step(
        &mut self,
        cn: &str,
        request: Request,
        policy: &Policy,
    ) -> Result<(Option<Step>, bool), rcgen::Error> {
        if self.phase_left(policy).is_some_and(|d| !d.is_zero()) {
            return Ok((None, false));
        }
        match self.phase() {
            Phase::Trust => {
                let next = self.next.take().expect("trust phase has a next CA");
                self.old = Some(std::mem::replace(&mut self.signer, next).cert);
                self.phase_since = Some(policy.now);
                Ok((Some(Step::Promoted), false))
            }
            Phase::Replace => {
                self.old = None;
                self.phase_since = None;
                Ok((Some(Step::DroppedOld), false))
            }
            Phase::Steady if request.replace => {
                self.next = Some(Ca::made(cn, None, policy)?);
                self.phase_since = Some(policy.now);
                Ok((Some(Step::TrustingNext), true))
            }
            Phase::Steady if request.renew || policy.due(&self.signer.cert) => {
                self.signer = Ca::made(cn, Some(&self.signer.key), policy)?;
                Ok((Some(Step::Renewed), request.renew))
            }
            Phase::Steady => Ok((None, false)),
        }
    }
}

/// Which CAs an annotation's value names (`cluster`, `clients`).
pub fn named_in(value: Option<&String>, which: &str) -> bool {
    value.is_some_and(|v| v.split(',').any(|w| w.trim() == which))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(now: i64) -> Policy {
        Policy {
            validity_days: 365,
            renewal_days: 30,
            day: DAY,
            phase: Duration::from_secs(100),
            now,
        }
    }

    /// On a short clock (`--certificate-day-seconds`), validity and
    /// renewal are counted in its days, and the renewal falls due when the
    /// wait says.
    #[test]
    fn a_short_day_scales_validity_and_renewal() {
        let t0 = 1_800_000_000;
        let short = |now| Policy {
            day: 2,
            ..policy(now)
        };
        let ca = CaState::new("skein test CA", &short(t0)).unwrap();
        assert_eq!(not_after(&ca.signer.cert), Some(t0 + 730));
        assert_eq!(
            short(t0).renewal_in(&ca.signer.cert),
            Duration::from_secs(670)
        );
        assert!(!short(t0 + 669).due(&ca.signer.cert));
        assert!(short(t0 + 670).due(&ca.signer.cert));
        assert_eq!(
            short(t0 + 900).renewal_in(&ca.signer.cert),
            Duration::ZERO,
            "expired"
        );
        assert_eq!(short(t0).renewal_in("not a certificate"), Duration::ZERO);
    }

    fn certs(pem: &str) -> usize {
        pem.matches("BEGIN CERTIFICATE").count()
    }

    /// A replacement trusts the new CA first, then lets it sign while the
    /// old one is still trusted, then drops the old one; each phase waits
    /// its time, and the Secret round-trips every state.
    #[test]
    fn a_replacement_trusts_then_signs_then_drops() {
        let t0 = 1_800_000_000;
        let mut ca = CaState::new("test CA", &policy(t0)).unwrap();
        let first = ca.signer.clone();
        let replace = Request {
            renew: false,
            replace: true,
        };
        assert_eq!(
            ca.step("test CA", replace, &policy(t0)).unwrap(),
            (Some(Step::TrustingNext), true)
        );
        assert_eq!(ca.phase(), Phase::Trust);
        assert_eq!(ca.signer, first, "the old CA still signs");
        assert_eq!(certs(&ca.bundle()), 2);
        // Too early: nothing happens, a second request waits.
        assert_eq!(
            ca.step("test CA", replace, &policy(t0 + 50)).unwrap(),
            (None, false)
        );
        assert_eq!(
            ca.phase_left(&policy(t0 + 50)),
            Some(Duration::from_secs(50))
        );
        let (data, annotations) = ca.secret_parts();
        assert_eq!(read_back(&data, annotations), ca);

        let (step, _) = ca.step("test CA", replace, &policy(t0 + 100)).unwrap();
        assert_eq!(step, Some(Step::Promoted));
        assert_ne!(ca.signer, first);
        assert_eq!(ca.old.as_deref(), Some(first.cert.as_str()));
        assert_eq!(certs(&ca.bundle()), 2);
        let (data, annotations) = ca.secret_parts();
        assert_eq!(read_back(&data, annotations), ca);

        let (step, _) = ca.step("test CA", replace, &policy(t0 + 200)).unwrap();
        assert_eq!(step, Some(Step::DroppedOld));
        assert_eq!(ca.phase(), Phase::Steady);
        assert_eq!(certs(&ca.bundle()), 1);
        assert_ne!(ca.signer.key, first.key);
    }

    /// A renewal keeps the key and moves the expiry; one falls due
    /// `renewal_days` before the expiry.
    #[test]
    fn renewal_keeps_the_key_and_comes_before_expiry() {
        let t0 = 1_800_000_000;
        let mut ca = CaState::new("test CA", &policy(t0)).unwrap();
        let first = ca.signer.clone();
        assert_eq!(not_after(&first.cert), Some(t0 + 365 * DAY));
        assert!(!policy(t0 + 300 * DAY).due(&first.cert));
        assert!(policy(t0 + 336 * DAY).due(&first.cert));
        assert_eq!(
            ca.step("test CA", Request::default(), &policy(t0 + 10))
                .unwrap(),
            (None, false)
        );
        let later = policy(t0 + 336 * DAY);
        assert_eq!(
            ca.step("test CA", Request::default(), &later).unwrap(),
            (Some(Step::Renewed), false)
        );
        assert_eq!(ca.signer.key, first.key);
        assert_eq!(not_after(&ca.signer.cert), Some(later.now + 365 * DAY));
        let renew = Request {
            renew: true,
            replace: false,
        };
        assert_eq!(
            ca.step("test CA", renew, &later).unwrap(),
            (Some(Step::Renewed), true)
        );
    }

    fn read_back(data: &[(&str, String)], annotations: BTreeMap<String, String>) -> CaState {
        let secret = Secret {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                annotations: Some(annotations),
                ..Default::default()
            },
            data: Some(
                data.iter()
                    .map(|(k, v)| {
                        (
                            k.to_string(),
                            k8s_openapi::ByteString(v.as_bytes().to_vec()),
                        )
                    })
                    .collect(),
            ),
            ..Secret::default()
        };
        CaState::read(&secret).unwrap()
    }

    /// A renewed CA (same key, new certificate) is the same CA; two CAs
    /// made apart are not, even with one subject.
    #[test]
    fn the_same_key_is_the_same_ca_whatever_the_certificate() {
        let t0 = 1_800_000_000;
        let mut ca = CaState::new("test CA", &policy(t0)).unwrap();
        let first = ca.signer.cert.clone();
        let renew = Request {
            renew: true,
            replace: false,
        };
        ca.step("test CA", renew, &policy(t0 + 10)).unwrap();
        assert_ne!(first, ca.signer.cert);
        assert!(same_key(&first, &ca.signer.cert));
        let other = CaState::new("test CA", &policy(t0)).unwrap();
        assert!(!same_key(&first, &other.signer.cert));
        // A bundle is compared by its first certificate.
        assert!(same_key(&format!("{first}{}", other.signer.cert), &first));
        assert!(!same_key("not a certificate", "not a certificate"));
    }

    #[test]
    fn annotations_name_the_cas() {
        let v = "cluster, clients".to_string();
        assert!(named_in(Some(&v), "cluster") && named_in(Some(&v), "clients"));
        assert!(!named_in(Some(&"cluster".to_string()), "clients"));
        assert!(!named_in(None, "cluster"));
    }
}
