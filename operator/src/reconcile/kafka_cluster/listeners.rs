//! The client listeners' steps: the Services (and Ingresses) of external
//! listeners, whose node ports and load balancer addresses the brokers
//! advertise (so they come before the ConfigMap); the addresses of the nodes
//! the brokers run on (nodeport clients bootstrap from them); the
//! certificates, which hold every one of those names.

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;
use kube::ResourceExt;
use skein_crds::{KafkaCluster, ListenerType};
use tracing::{info, warn};

use super::admit::refuse;
use super::state::{Cx, Found, Outcome, REQUEUE_REFUSED};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::manifests::ClusterNames;
use crate::reconcile::apply;

/// Applies the external listeners' Services and Ingresses, and finds the
/// nodes the brokers run on.
pub async fn listener_services(cx: &Cx<'_>, found: &mut Found) -> Result<Outcome> {
    found.listener_services = apply_listener_services(cx.ctx, cx.kc, &cx.ns, &cx.names).await?;
    found.node_addresses = broker_node_addresses(cx.ctx, cx.kc, &cx.ns, &cx.names).await?;
    Ok(Outcome::Continue)
}

/// Makes, renews or rolls over the listener certificates.
pub async fn certificates(cx: &Cx<'_>, found: &mut Found) -> Result<Outcome> {
    let (ctx, kc) = (cx.ctx, cx.kc);
    let mut cert_names = found.node_addresses.clone();
    cert_names.extend(crate::manifests::listeners::external_names(
        kc,
        &found.listener_services,
    ));
    found.certificates =
        match crate::listener_tls::ensure(&ctx.client, kc, &cert_names, ctx.options.certificates)
            .await?
        {
            Ok(c) => c,
            // A Secret of the cluster's name that is someone else's, or one
            // CA brought for both: nothing more is written until it changes.
            // Neither is watched, so look again.
            Err(refused) => {
                refuse(cx, &refused).await?;
                return Ok(Outcome::Done(Action::requeue(REQUEUE_REFUSED)));
            }
        };
    Ok(Outcome::Continue)
}

/// The Secret holding the brokers' `delegation.token.secret.key`, before
/// the StatefulSet that reads it (`spec.delegationTokens.enabled`).
pub async fn delegation_token_key(cx: &Cx<'_>, _found: &mut Found) -> Result<Outcome> {
    let written = crate::delegation_token_key::ensure(&cx.ctx.client, cx.kc)
        .await
        .map_err(|source| crate::error::Error::Dereference {
            what: "the delegation token key Secret",
            source,
        })?;
    if let Err(foreign) = written {
        refuse(
            cx,
            &crate::validate::InvalidSpec::SecretOwnedByAnother(foreign),
        )
        .await?;
        return Ok(Outcome::Done(Action::requeue(REQUEUE_REFUSED)));
    }
    Ok(Outcome::Continue)
}

/// The addresses of the nodes the cluster's broker pods run on
/// (`status.hostIP`), sorted, without repeats.
async fn broker_node_addresses(
    ctx: &Context,
    kc: &KafkaCluster,
    ns: &str,
    names: &ClusterNames,
) -> Result<Vec<String>> {
    if kc.spec.listeners.clients.is_empty() {
        return Ok(Vec::new());
    }
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let selector = crate::manifests::selector_string(names);
    let list = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|source| Error::Dereference {
            what: "broker pods",
            source,
        })?;
    let mut out: Vec<String> = list
        .items
        .iter()
        .filter_map(|p| p.status.as_ref()?.host_ip.clone())
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

/// Applies the external listeners' Services (as the API server returns
/// them: node ports assigned, load balancer addresses once the cloud gave
/// them) and Ingresses, and deletes those no longer wanted (a removed
/// listener, brokers scaled away).
async fn apply_listener_services(
    ctx: &Context,
    kc: &KafkaCluster,
    ns: &str,
    names: &ClusterNames,
) -> Result<Vec<Service>> {
    let wanted = crate::manifests::listeners::services(kc, names);
    let mut applied = Vec::with_capacity(wanted.len());
    for svc in &wanted {
        applied.push(apply(&ctx.client, ns, svc).await?);
    }
    let ingresses = crate::manifests::listeners::ingresses(kc, names);
    for ing in &ingresses {
        apply(&ctx.client, ns, ing).await?;
    }
    // Objects to remove exist only if an external listener did (the status
    // lists what the last reconcile applied).
    let had = |t: ListenerType| {
        kc.status
            .iter()
            .flat_map(|s| &s.listeners)
            .any(|l| l.type_ == t.as_str())
    };
    let had_ingress = had(ListenerType::Ingress);
    let had_external =
        had_ingress || had(ListenerType::Nodeport) || had(ListenerType::Loadbalancer);
    if had_external {
        prune_listener_objects::<Service>(ctx, ns, names, &wanted).await?;
    }
    if had_ingress {
        prune_listener_objects::<Ingress>(ctx, ns, names, &ingresses).await?;
    }
    Ok(applied)
}

/// Deletes the listener objects of kind `K` of this cluster not in `wanted`.
async fn prune_listener_objects<K>(
    ctx: &Context,
    ns: &str,
    names: &ClusterNames,
    wanted: &[K],
) -> Result<()>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), ns);
    let selector = format!(
        "{},{}",
        crate::manifests::selector_string(names),
        crate::manifests::listeners::LISTENER_LABEL
    );
    let existing = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|source| Error::Dereference {
            what: "listener Services and Ingresses",
            source,
        })?;
    for obj in existing.items {
        let name = obj.name_any();
        if !wanted
            .iter()
            .any(|w| w.meta().name.as_deref() == Some(&name))
        {
            info!(cluster = %names.cluster, namespace = %ns, kind = %K::kind(&()), name = %name,
                "deleting a listener object no longer wanted");
            if let Err(e) = api.delete(&name, &Default::default()).await {
                warn!(kind = %K::kind(&()), name = %name, error = %e, "could not delete a listener object");
            }
        }
    }
    Ok(())
}
