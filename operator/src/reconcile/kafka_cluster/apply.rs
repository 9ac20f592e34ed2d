//! The steps that build the cluster's objects and apply them: the build
//! (pure, keeping the claim template the API server will not change), the
//! controller's settings and the StatefulSet size a scale allows, the apply
//! in its fixed order (ConfigMap, Services, ServiceAccount, PDB, then the
//! StatefulSet, so its pods find their config and DNS), and the volumes.

use k8s_openapi::api::apps::v1::StatefulSet;
use kube::api::Api;
use kube::ResourceExt;

use super::state::{Cx, Found, Outcome};
use crate::error::{Error, Result};
use crate::manifests::{cluster_objects, pdb};
use crate::reconcile::{apply, brokers, storage};

/// Builds every object, and reads the StatefulSet as it is.
pub async fn build(cx: &Cx<'_>, found: &mut Found) -> Result<Outcome> {
    let mut objects = cluster_objects(cx.kc, &cx.ctx.options, &found.listener_services);
    let sts_api: Api<StatefulSet> = Api::namespaced(cx.ctx.client.clone(), &cx.ns);
    let current_sts = sts_api
        .get_opt(&objects.statefulset.name_any())
        .await
        .map_err(|source| Error::Dereference {
            what: "StatefulSet",
            source,
        })?;
    // Claim templates never change (the API server refuses it): a grown
    // spec.storage.size reaches the volumes through their claims instead.
    let template = current_sts.as_ref().and_then(storage::template_size);
    if let Some(size) = &template {
        storage::keep_template_size(&mut objects.statefulset, size);
    }
    // Evictions (node drains) take one broker at a time, and none while a
    // partition is at its min.insync.replicas.
    let refuse = found
        .controller
        .as_ref()
        .and_then(|rt| crate::reconcile::roll::cannot_spare_a_broker(&rt.controller.view(), cx.kc));
    if let Some(why) = refuse {
        pdb::refuse_evictions(&mut objects.pdb);
        tracing::info!(cluster = %cx.name, %why, "evictions refused");
    }
    found.objects = Some(objects);
    found.current_sts = current_sts;
    found.template = template;
    Ok(Outcome::Continue)
}

/// The StatefulSet's replicas as they are.
fn current_replicas(found: &Found) -> Option<i32> {
    found
        .current_sts
        .as_ref()
        .and_then(|s| s.spec.as_ref().and_then(|s| s.replicas))
}

/// Self-healing and the replication throttle as the spec says; brokers a
/// scale-down is draining take no new replica.
pub async fn controller_settings(cx: &Cx<'_>, found: &mut Found) -> Result<Outcome> {
    let Some(rt) = &found.controller else {
        return Ok(Outcome::Continue);
    };
    let kc = cx.kc;
    let leaving = cx.desired.leaving(current_replicas(found));
    let healing = &kc.spec.self_healing;
    rt.controller.set_self_healing(
        healing
            .enabled
            .then(|| skein_controller::SelfHealingConfig {
                broker_loss_grace_ms: healing.broker_loss_grace_seconds.max(0) as u64 * 1000,
                excluded: leaving,
            }),
    );
    crate::reconcile::replication_throttle::ensure(rt, kc);
    Ok(Outcome::Continue)
}

/// The StatefulSet size to apply: the spec's, except while a scale-down
/// drains the leaving brokers.
pub async fn scale(cx: &Cx<'_>, found: &mut Found) -> Result<Outcome> {
    let Some(rt) = &found.controller else {
        return Ok(Outcome::Continue);
    };
    let step = brokers::scale_step(rt, cx.kc, &cx.desired, current_replicas(found));
    rt.set_brokers(step.replicas);
    if let Some(spec) = found
        .objects
        .as_mut()
        .and_then(|o| o.statefulset.spec.as_mut())
    {
        spec.replicas = Some(step.replicas);
    }
    found.progress = step.progress;
    Ok(Outcome::Continue)
}

/// Server-side applies the objects in their fixed order.
pub async fn apply_objects(cx: &Cx<'_>, found: &mut Found) -> Result<Outcome> {
    let (client, ns) = (&cx.ctx.client, cx.ns.as_str());
    let objects = found.objects.as_ref().expect("Build runs before Apply");
    apply(client, ns, &objects.config_map).await?;
    apply(client, ns, &objects.headless_service).await?;
    apply(client, ns, &objects.bootstrap_service).await?;
    apply(client, ns, &objects.service_account).await?;
    apply(client, ns, &objects.pdb).await?;
    if let Some(np) = &objects.network_policy {
        apply(client, ns, np).await?;
    }
    found.applied_sts = Some(apply(client, ns, &objects.statefulset).await?);
    Ok(Outcome::Continue)
}

/// Grows the broker volumes to the spec's size, claim by claim.
pub async fn volumes(cx: &Cx<'_>, found: &mut Found) -> Result<Outcome> {
    found.volumes = storage::volume_step(
        cx.ctx,
        cx.kc,
        &cx.ns,
        &cx.names,
        found.template.as_ref(),
        cx.desired.replicas,
    )
    .await?;
    Ok(Outcome::Continue)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use http::{Request, Response};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kube::client::Body;
    use serde_json::json;
    use skein_crds::{ClusterRef, TopicSpec};

    use super::*;
    use crate::context::{BoxFuture, Context, TopicRemover};
    use crate::error::TopicRemovalError;
    use crate::manifests::test_cluster;
    use crate::reconcile::kafka_cluster::{Step, STEPS};

    /// Scale never removes a topic.
    struct NoRemover;

    impl TopicRemover for NoRemover {
        fn delete_topic<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
            _: &'a str,
        ) -> BoxFuture<'a, Result<(), TopicRemovalError>> {
            unreachable!("no step here removes a topic")
        }
    }

    /// A context whose API server answers nothing: the steps tested here
    /// send no request.
    fn context() -> Context {
        let (service, _) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = kube::Client::new(service, "ns");
        let metrics = crate::Metrics::new(&prometheus::Registry::new()).unwrap();
        Context::new(
            client,
            metrics,
            Default::default(),
            Arc::new(NoRemover),
            None,
        )
    }

    /// The in-memory controller (brokers 0..3) with topic `orders` (3
    /// partitions, one replica each), what Build found for `kc` and a
    /// StatefulSet of 3 pods.
    fn found_with_three_brokers(kc: &skein_crds::KafkaCluster, ctx: &Context) -> Found {
        let rt = crate::cluster_controllers::tests::runtime();
        let orders = TopicSpec {
            cluster_ref: ClusterRef {
                name: "demo".into(),
            },
            topic_name: None,
            partitions: 3,
            replication_factor: 1,
            config: BTreeMap::new(),
        };
        rt.ensure_topic(&orders, "orders").unwrap();
        let objects = cluster_objects(kc, &ctx.options, &[]);
        let mut current = objects.statefulset.clone();
        current.spec.as_mut().unwrap().replicas = Some(3);
        Found {
            controller: Some(Arc::new(rt)),
            objects: Some(objects),
            current_sts: Some(current),
            ..Found::default()
        }
    }

    fn statefulset_replicas(found: &Found) -> Option<i32> {
        found.objects.as_ref()?.statefulset.spec.as_ref()?.replicas
    }

    #[tokio::test]
    async fn scale_alone_keeps_the_statefulset_while_a_leaving_broker_holds_replicas() {
        let ctx = context();
        let kc = test_cluster(json!({"replicas": 2}));
        let cx = Cx::new(&kc, &ctx, Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)).unwrap();
        let mut found = found_with_three_brokers(&kc, &ctx);
        let view = found.controller.as_ref().unwrap().controller.view();
        assert!(
            view.topics["orders"]
                .partitions
                .iter()
                .any(|p| p.replicas.contains(&2)),
            "broker 2 holds a replica of orders"
        );
        let outcome = Step::Scale.run(&cx, &mut found).await.unwrap();
        assert_eq!(outcome, Outcome::Continue);
        assert_eq!(statefulset_replicas(&found), Some(3), "not shrunk yet");
        let progress = found.progress.expect("a drain is in progress");
        assert_eq!(progress.reason, "DrainingBrokers");
    }

    #[tokio::test]
    async fn scale_alone_applies_the_desired_size_when_nothing_leaves() {
        let ctx = context();
        let kc = test_cluster(json!({"replicas": 3}));
        let cx = Cx::new(&kc, &ctx, Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)).unwrap();
        let mut found = found_with_three_brokers(&kc, &ctx);
        Step::Scale.run(&cx, &mut found).await.unwrap();
        assert_eq!(statefulset_replicas(&found), Some(3));
        assert_eq!(found.progress, None);
    }

    #[test]
    fn the_objects_are_built_before_the_scale_sizes_them_and_applied_after() {
        let at = |s: Step| STEPS.iter().position(|x| *x == s).unwrap();
        assert!(at(Step::Build) < at(Step::Scale));
        assert!(at(Step::Scale) < at(Step::Apply));
        assert!(at(Step::Apply) < at(Step::Status));
    }
}
