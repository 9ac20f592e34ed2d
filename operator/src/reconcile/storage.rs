//! Storage growth: `spec.storage.size` grew, so every broker volume is
//! expanded in place.
//!
//! A StatefulSet's volume claim templates cannot change, so the StatefulSet
//! keeps the size it was created with ([`template_size`] is fed back into the
//! built object) and each PersistentVolumeClaim is patched to the new size
//! instead; a claim made later from the old template (a scale-up, a lost
//! volume) is grown by the same step. The storage system does the rest: the
//! external resizer grows the volume and the kubelet its filesystem, online,
//! with the broker running; the claim's `status.capacity` says when it is
//! done. A driver that grows filesystems only offline marks the claim
//! `FileSystemResizePending`: that broker's pod is restarted once, under the
//! rolling restart's rules ([`filesystem_restarts`]). Shrinking is refused by the CRD (a CEL rule); a claim already larger
//! than the spec is reported, never touched.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::ResourceExt;
use serde_json::json;
use skein_crds::KafkaCluster;
use tracing::{info, warn};

use super::publish;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::manifests::{selector_string, ClusterNames};
use crate::quantity::bytes;

/// The data volume's name in the claim templates (claims are `data-<pod>`).
const DATA: &str = "data";

/// What the reconciler needs to know about one claim.
#[derive(Clone, Debug, PartialEq)]
pub struct Volume {
    pub name: String,
    pub bound: bool,
    /// `spec.resources.requests.storage`, in bytes.
    pub requested: Option<u128>,
    /// `status.capacity.storage`, in bytes: what the volume has now.
    pub capacity: Option<u128>,
    /// The volume grew but its filesystem waits for the pod to restart.
    pub fs_resize_pending: bool,
    /// Since when (the condition's last transition), when known.
    pub fs_resize_pending_since: Option<Timestamp>,
}

impl Volume {
    pub fn of(pvc: &PersistentVolumeClaim) -> Volume {
        let requested = pvc
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .and_then(bytes);
        let status = pvc.status.as_ref();
        let pending = status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .find(|c| c.type_ == "FileSystemResizePending" && c.status == "True");
        Volume {
            name: pvc.name_any(),
            bound: status.and_then(|s| s.phase.as_deref()) == Some("Bound"),
            requested,
            capacity: status
                .and_then(|s| s.capacity.as_ref())
                .and_then(|c| c.get("storage"))
                .and_then(bytes),
            fs_resize_pending: pending.is_some(),
            fs_resize_pending_since: pending
                .and_then(|c| c.last_transition_time.as_ref())
                .map(|t| t.0),
        }
    }
}

/// What to do about the claims for a wanted size.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VolumePlan {
    /// Bound claims asking for less: patched to the wanted size.
    pub grow: Vec<String>,
    /// Asked for enough, not there yet (or not bound yet): the storage
    /// system is working on them.
    pub waiting: Vec<String>,
    /// Of those, the ones whose filesystem grows only when the pod restarts.
    pub fs_resize_pending: Vec<String>,
    /// Asking for more than the spec: reported, never shrunk.
    pub larger: Vec<String>,
    /// At the wanted size.
    pub at_size: usize,
}

/// Plans the claims of one cluster against the wanted size (bytes).
pub fn plan(want: u128, volumes: &[Volume]) -> VolumePlan {
    let mut p = VolumePlan::default();
    for v in volumes {
        let requested = v.requested.unwrap_or(0);
        if requested > want {
            p.larger.push(v.name.clone());
        } else if requested < want {
            // Only a bound claim may change its request; one still pending
            // is provisioned at its old size and grown on a later pass.
            if v.bound {
                p.grow.push(v.name.clone());
            } else {
                p.waiting.push(v.name.clone());
            }
        } else if v.capacity.unwrap_or(0) < want || !v.bound {
            p.waiting.push(v.name.clone());
            if v.fs_resize_pending {
                p.fs_resize_pending.push(v.name.clone());
            }
        } else {
            p.at_size += 1;
        }
    }
    p
}

/// The storage size in a StatefulSet's data claim template.
pub fn template_size(sts: &StatefulSet) -> Option<Quantity> {
    sts.spec
        .as_ref()?
        .volume_claim_templates
        .as_ref()?
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(DATA))?
        .spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")
        .cloned()
}

/// Puts `size` back into the built StatefulSet's data claim template (the
/// API server refuses any change to claim templates).
pub fn keep_template_size(built: &mut StatefulSet, size: &Quantity) {
    let claim = built
        .spec
        .as_mut()
        .and_then(|s| s.volume_claim_templates.as_mut())
        .and_then(|t| {
            t.iter_mut()
                .find(|c| c.metadata.name.as_deref() == Some(DATA))
        });
    if let Some(requests) = claim
        .and_then(|c| c.spec.as_mut())
        .and_then(|s| s.resources.as_mut())
        .and_then(|r| r.requests.as_mut())
    {
        requests.insert("storage".into(), size.clone());
    }
}

/// How the cluster's volumes stand, for its status.
#[derive(Clone, Debug, PartialEq)]
pub enum VolumeReport {
    /// Every volume has the spec's size.
    AtSize { volumes: usize },
    /// Growing: `done` of `total` volumes at size.
    Resizing {
        done: usize,
        total: usize,
        detail: String,
        /// Brokers whose filesystem grows only when their pod restarts,
        /// with since when it waits ([`filesystem_restarts`]).
        restart: Vec<(i32, Option<Timestamp>)>,
    },
    /// The storage refused to grow a volume (its class does not allow
    /// expansion, a quota, …): the message says which and why.
    ExpansionRefused { message: String },
    /// Volumes larger than the spec (grown by hand): nothing shrinks them.
    LargerThanSpec { message: String },
}

/// One pass: lists the cluster's claims, patches the ones to grow, reports.
/// `None` when there is nothing to say (the claims were never resized and
/// the template has the spec's size).
pub async fn volume_step(
    ctx: &Context,
    kc: &KafkaCluster,
    ns: &str,
    names: &ClusterNames,
    template: Option<&Quantity>,
    replicas: i32,
) -> Result<Option<VolumeReport>> {
    let size = &kc.spec.storage.size;
    let Some(want) = bytes(size) else {
        return Ok(None); // the CRD refuses it; nothing sensible to do
    };
    let resized_before = kc
        .status
        .as_ref()
        .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Resizing"));
    // Nothing to do while the claim template asks for the spec's size (or
    // there is no StatefulSet yet: its claims will be made at that size),
    // unless a resize was reported before and its end must be.
    let template_at_spec = template.is_none_or(|t| bytes(t) == Some(want));
    if template_at_spec && !resized_before {
        return Ok(None);
    }
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), ns);
    let claims = pvcs
        .list(&ListParams::default().labels(&selector_string(names)))
        .await
        .map_err(|source| Error::Dereference {
            what: "PersistentVolumeClaims",
            source,
        })?
        .items;
    // The claims of the brokers the spec has (a scaled-down broker's claim
    // stays behind, as StatefulSets leave it, and is not grown).
    let prefix = format!("{DATA}-{}-", names.cluster);
    let ours: Vec<Volume> = claims
        .iter()
        .filter(|c| {
            c.name_any()
                .strip_prefix(&prefix)
                .and_then(|o| o.parse::<i32>().ok())
                .is_some_and(|o| o < replicas)
        })
        .map(Volume::of)
        .collect();
    let p = plan(want, &ours);
    let total = ours.len();
    if !p.larger.is_empty() {
        return Ok(Some(VolumeReport::LargerThanSpec {
            message: format!(
                "spec.storage.size {} is smaller than what {} already ask(s) for; volumes cannot shrink",
                size.0,
                p.larger.join(", ")
            ),
        }));
    }
    let mut refused = Vec::new();
    let mut asked = Vec::new();
    for claim in &p.grow {
        let patch = json!({"spec": {"resources": {"requests": {"storage": size.0}}}});
        match pvcs
            .patch(claim, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                info!(claim, size = %size.0, "expanding broker volume");
                asked.push(claim.clone());
            }
            // Admission refuses a claim whose StorageClass does not allow
            // expansion (403), a quota may too: the spec cannot be met.
            Err(kube::Error::Api(e)) if (400..500).contains(&e.code) => {
                warn!(claim, error = %e.message, "volume expansion refused");
                refused.push(format!("{claim}: {}", e.message));
            }
            Err(source) => {
                return Err(Error::Apply {
                    kind: "PersistentVolumeClaim".into(),
                    name: claim.clone(),
                    source,
                })
            }
        }
    }
    if !asked.is_empty() {
        // One event per pass (the recorder would fold one per claim into a
        // series of the first).
        publish(
            ctx,
            kc,
            EventType::Normal,
            "ExpandingVolume",
            "Resize",
            format!("requesting {} for {}", size.0, asked.join(", ")),
        )
        .await;
    }
    if !refused.is_empty() {
        let message = format!(
            "cannot grow the volumes to {}: {}",
            size.0,
            refused.join("; ")
        );
        if !resized_refusal_reported(kc) {
            publish(
                ctx,
                kc,
                EventType::Warning,
                "VolumeExpansionRefused",
                "Resize",
                message.clone(),
            )
            .await;
        }
        return Ok(Some(VolumeReport::ExpansionRefused { message }));
    }
    if p.grow.is_empty() && p.waiting.is_empty() {
        if kc.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Resizing" && c.status == "True")
        }) {
            publish(
                ctx,
                kc,
                EventType::Normal,
                "VolumesResized",
                "Resize",
                format!("all {total} broker volumes have {}", size.0),
            )
            .await;
        }
        return Ok(Some(VolumeReport::AtSize { volumes: total }));
    }
    let mut detail = format!("{} of {total} volumes have {}", p.at_size, size.0);
    if !p.fs_resize_pending.is_empty() {
        detail.push_str(&format!(
            "; waiting for a pod restart to grow the filesystem: {}",
            p.fs_resize_pending.join(", ")
        ));
    }
    Ok(Some(VolumeReport::Resizing {
        done: p.at_size,
        total,
        detail,
        restart: filesystem_restarts(&ours, &prefix),
    }))
}

/// The brokers (ordinals) whose volume grew but whose filesystem waits for
/// the pod to restart (drivers that grow filesystems only offline), with
/// since when: the rolling restart restarts each once, under its rules.
pub fn filesystem_restarts(volumes: &[Volume], prefix: &str) -> Vec<(i32, Option<Timestamp>)> {
    volumes
        .iter()
        .filter(|v| v.fs_resize_pending)
        .filter_map(|v| {
            let ordinal = v.name.strip_prefix(prefix)?.parse::<i32>().ok()?;
            Some((ordinal, v.fs_resize_pending_since))
        })
        .collect()
}

/// Whether the status already says expansion was refused (one Warning per
/// refusal, not one per reconcile).
fn resized_refusal_reported(kc: &KafkaCluster) -> bool {
    kc.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Resizing" && c.reason == "VolumeExpansionRefused")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(name: &str, bound: bool, requested: u128, capacity: u128) -> Volume {
        Volume {
            name: name.into(),
            bound,
            requested: Some(requested),
            capacity: Some(capacity),
            fs_resize_pending: false,
            fs_resize_pending_since: None,
        }
    }

    #[test]
    fn brokers_whose_filesystem_waits_for_a_restart_are_named() {
        let mut a = v("data-demo-2", true, 200, 200);
        a.fs_resize_pending = true;
        a.fs_resize_pending_since = Some("2026-12-05T06:00:00Z".parse().unwrap());
        let vols = [
            a,
            v("data-demo-0", true, 200, 100),
            v("data-demo-1", true, 200, 200),
        ];
        assert_eq!(
            filesystem_restarts(&vols, "data-demo-"),
            vec![(2, Some("2026-12-05T06:00:00Z".parse().unwrap()))]
        );
    }

    #[test]
    fn bound_claims_asking_for_less_are_grown() {
        let p = plan(
            200,
            &[
                v("a", true, 100, 100),
                v("b", true, 200, 200),
                v("c", false, 100, 0),
            ],
        );
        assert_eq!(p.grow, ["a"]);
        assert_eq!(
            p.waiting,
            ["c"],
            "a pending claim cannot change its request yet"
        );
        assert_eq!(p.at_size, 1);
    }

    #[test]
    fn a_claim_asking_enough_waits_for_its_capacity() {
        let mut slow = v("a", true, 200, 100);
        slow.fs_resize_pending = true;
        let p = plan(200, &[slow, v("b", true, 200, 300)]);
        assert!(p.grow.is_empty());
        assert_eq!(p.waiting, ["a"]);
        assert_eq!(p.fs_resize_pending, ["a"]);
        assert_eq!(p.at_size, 1, "a volume larger than asked for is at size");
    }

    #[test]
    fn a_claim_asking_for_more_than_the_spec_is_never_shrunk() {
        let p = plan(100, &[v("a", true, 200, 200), v("b", true, 100, 100)]);
        assert_eq!(p.larger, ["a"]);
        assert!(p.grow.is_empty());
    }

    #[test]
    fn the_template_keeps_its_size() {
        use crate::manifests::statefulset;
        let mut kc: KafkaCluster = serde_json::from_value(json!({
            "apiVersion": "skein.dev/v1alpha1", "kind": "KafkaCluster",
            "metadata": {"name": "demo", "namespace": "ns"},
            "spec": {"storage": {"size": "20Gi"}},
        }))
        .unwrap();
        let names = ClusterNames::of(&kc);
        let mut built = statefulset::build(&kc, &names, &Default::default(), "hash");
        assert_eq!(template_size(&built), Some(Quantity("20Gi".into())));
        keep_template_size(&mut built, &Quantity("10Gi".into()));
        assert_eq!(template_size(&built), Some(Quantity("10Gi".into())));
        kc.spec.storage.size = Quantity("30Gi".into());
        assert_eq!(
            template_size(&statefulset::build(
                &kc,
                &names,
                &Default::default(),
                "hash"
            )),
            Some(Quantity("30Gi".into()))
        );
    }
}
