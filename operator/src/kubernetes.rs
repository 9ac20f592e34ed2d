//! The `kubernetes` platform: the KafkaCluster, Topic and KafkaUser controllers, the
//! metrics endpoint and leader election, wired together.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{join_all, BoxFuture};
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use prometheus::Registry;
use skein_crds::{KafkaCluster, KafkaUser, Topic};
use tracing::{debug, error, info, warn};

use crate::cluster_controllers::ClusterControllers;
use crate::context::Context;
use crate::leader::{LeaderElector, LeaseConfig};
use crate::manifests::{labels, BuildOptions};
use crate::metrics::Metrics;
use crate::reconcile::{kafka_cluster, kafka_user, topic};

/// Settings of `skein-operator kubernetes`.
#[derive(Clone, Debug)]
pub struct KubernetesOptions {
    pub metrics_listen: SocketAddr,
    /// Namespaces to watch; empty means all.
    pub namespaces: Vec<String>,
    pub build: BuildOptions,
    /// `None` runs without leader election (a single replica).
    pub lease: Option<LeaseConfig>,
    /// Broker session timeout of the clusters' controllers.
    pub session_timeout_ms: u64,
    /// How long the control planes' certificates live.
    pub control_certs: crate::control_tls::Lifetimes,
}

fn api<K>(client: &Client, ns: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

fn cluster_controller(
    client: &Client,
    ns: Option<&str>,
    ctx: Arc<Context>,
) -> BoxFuture<'static, ()> {
    let owned =
        watcher::Config::default().labels(&format!("{}={}", labels::MANAGED_BY, labels::OPERATOR));
    let controller = Controller::new(api::<KafkaCluster>(client, ns), watcher::Config::default())
        .owns(api::<ConfigMap>(client, ns), owned.clone())
        .owns(api::<Service>(client, ns), owned.clone())
        .owns(api::<ServiceAccount>(client, ns), owned.clone())
        .owns(api::<PodDisruptionBudget>(client, ns), owned.clone())
        .owns(api::<StatefulSet>(client, ns), owned);
    // A broker's session coming up (or going) changes what the reconcile
    // decides without changing any object it watches.
    let controller = match &ctx.controllers {
        Some(c) => controller.reconcile_all_on(c.view_changes()),
        None => controller,
    };
    controller
        .shutdown_on_signal()
        .run(
            kafka_cluster::reconcile,
            kafka_cluster::error_policy,
            ctx.clone(),
        )
        .for_each(move |res| {
            let ctx = ctx.clone();
            async move {
                match res {
                    Ok((obj, _)) => debug!(cluster = %obj.name, "reconciled"),
                    // A deleted KafkaCluster (or an object it owned, going with
                    // it): stop its controller once the API confirms it is gone.
                    Err(kube::runtime::controller::Error::ObjectNotFound(obj)) => {
                        forget_deleted_cluster(&ctx, obj.namespace.as_deref(), &obj.name).await
                    }
                    Err(e) => warn!(error = %e, "KafkaCluster controller"),
                }
            }
        })
        .boxed()
}

/// Stops the controller of a KafkaCluster the API server no longer has.
async fn forget_deleted_cluster(ctx: &Context, namespace: Option<&str>, name: &str) {
    let (Some(controllers), Some(ns)) = (&ctx.controllers, namespace) else {
        return;
    };
    if controllers.get(ns, name).is_none() {
        return;
    }
    let api: Api<KafkaCluster> = Api::namespaced(ctx.client.clone(), ns);
    match api.get_opt(name).await {
        Ok(None) => {
            controllers.remove(ns, name);
        }
        Ok(Some(_)) => {}
        Err(e) => warn!(error = %e, cluster = name, "checking whether a KafkaCluster is gone"),
    }
}

/// The controller of a resource that names its KafkaCluster (Topic,
/// KafkaUser): a cluster appearing, changing or going away re-checks the
/// resources that name it.
fn cluster_child_controller<K, Fut>(
    client: &Client,
    ns: Option<&str>,
    ctx: Arc<Context>,
    cluster_of: fn(&K) -> &str,
    reconcile: fn(Arc<K>, Arc<Context>) -> Fut,
    error_policy: fn(
        Arc<K>,
        &crate::error::Error,
        Arc<Context>,
    ) -> kube::runtime::controller::Action,
) -> BoxFuture<'static, ()>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    Fut: std::future::Future<Output = crate::error::Result<kube::runtime::controller::Action>>
        + Send
        + 'static,
{
    let controller = Controller::new(api::<K>(client, ns), watcher::Config::default());
    let children = controller.store();
    controller
        .watches(
            api::<KafkaCluster>(client, ns),
            watcher::Config::default(),
            move |kc| {
                let (name, ns) = (kc.name_any(), kc.namespace());
                children
                    .state()
                    .into_iter()
                    .filter(|c| cluster_of(c) == name && c.namespace() == ns)
                    .map(|c| ObjectRef::from_obj(&*c))
                    .collect::<Vec<_>>()
            },
        )
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|res| async move {
            match res {
                Ok((obj, _)) => debug!(kind = %K::kind(&()), name = %obj.name, "reconciled"),
                Err(e) => warn!(error = %e, kind = %K::kind(&()), "controller"),
            }
        })
        .boxed()
}

fn topic_controller(
    client: &Client,
    ns: Option<&str>,
    ctx: Arc<Context>,
) -> BoxFuture<'static, ()> {
    cluster_child_controller::<Topic, _>(
        client,
        ns,
        ctx,
        |t| &t.spec.cluster_ref.name,
        topic::reconcile,
        topic::error_policy,
    )
}

fn user_controller(client: &Client, ns: Option<&str>, ctx: Arc<Context>) -> BoxFuture<'static, ()> {
    cluster_child_controller::<KafkaUser, _>(
        client,
        ns,
        ctx,
        |u| &u.spec.cluster_ref.name,
        kafka_user::reconcile,
        kafka_user::error_policy,
    )
}

/// Runs the operator until a shutdown signal or the loss of the leader Lease.
pub async fn run(opts: KubernetesOptions) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let config = kube::Config::infer().await?;
    let client = Client::try_from(config.clone())?;
    let registry = Registry::new();
    let metrics = Metrics::new(&registry)?;
    let http = tokio::spawn(crate::http::serve(opts.metrics_listen, registry.clone()));

    let elector = opts
        .lease
        .clone()
        .map(|cfg| LeaderElector::new(client.clone(), cfg));
    if let Some(elector) = &elector {
        elector.acquire().await;
        metrics.leader.set(1);
    }

    let identity = opts.lease.as_ref().map(|l| l.identity.clone());
    let controllers = Arc::new(ClusterControllers::new(
        config,
        client.clone(),
        metrics.clone(),
        opts.session_timeout_ms,
        opts.control_certs,
    ));
    let mut ctx = Context::new(
        client.clone(),
        metrics.clone(),
        opts.build.clone(),
        controllers.clone(),
        identity,
    );
    ctx.controllers = Some(controllers);
    let ctx = Arc::new(ctx);
    let scopes: Vec<Option<&str>> = if opts.namespaces.is_empty() {
        vec![None]
    } else {
        opts.namespaces.iter().map(|n| Some(n.as_str())).collect()
    };
    let mut controllers = Vec::new();
    for ns in scopes {
        info!(namespace = ns.unwrap_or("<all>"), "watching");
        controllers.push(cluster_controller(&client, ns, ctx.clone()));
        controllers.push(topic_controller(&client, ns, ctx.clone()));
        controllers.push(user_controller(&client, ns, ctx.clone()));
    }
    let controllers = join_all(controllers);
    match &elector {
        Some(elector) => {
            tokio::select! {
                _ = controllers => info!("controllers stopped"),
                _ = elector.hold() => {
                    metrics.leader.set(0);
                    error!("leadership lost; exiting so a fresh replica can take over");
                    http.abort();
                    return Err("lost the leader lease".into());
                }
            }
        }
        None => {
            controllers.await;
            info!("controllers stopped");
        }
    }
    http.abort();
    // Give in-flight status writes a moment on shutdown.
    tokio::time::sleep(Duration::from_millis(100)).await;
    Ok(())
}
