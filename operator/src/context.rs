//! What every reconcile gets: the client, metrics, the event recorder, the
//! builder options and the way topic data is removed from a cluster.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::{Recorder, Reporter};
use kube::Client;

use crate::manifests::BuildOptions;
use crate::metrics::Metrics;

use crate::error::TopicRemovalError;

/// A boxed future, for the object-safe [`TopicRemover`].
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Removes a topic and its data from a running cluster. On Kubernetes that is
/// the cluster's controller in this operator
/// ([`crate::cluster_controllers::ClusterControllers`]): the deletion is a
/// metadata record, and brokers delete the partitions when they apply it.
/// The operator never speaks the Kafka protocol to its clusters, so it needs
/// no Kafka principal (and no listener has to trust an anonymous one). A
/// topic the cluster does not know counts as removed.
pub trait TopicRemover: Send + Sync {
    fn delete_topic<'a>(
        &'a self,
        namespace: &'a str,
        cluster: &'a str,
        topic: &'a str,
    ) -> BoxFuture<'a, Result<(), TopicRemovalError>>;
}

/// Shared state of the reconcilers.
pub struct Context {
    pub client: Client,
    pub metrics: Metrics,
    pub recorder: Recorder,
    pub options: BuildOptions,
    pub topic_remover: Arc<dyn TopicRemover>,
    /// How long a deleted Topic waits for its data to be removed before the
    /// finalizer gives up (so a broken cluster never blocks deletion forever).
    pub topic_cleanup_grace: Duration,
    /// The clusters' controllers (the `kubernetes` platform); `None` where
    /// no controller runs (reconcile tests against a mocked API server).
    pub controllers: Option<Arc<crate::cluster_controllers::ClusterControllers>>,
}

impl Context {
    /// A context with the standard reporter name and defaults.
    pub fn new(
        client: Client,
        metrics: Metrics,
        options: BuildOptions,
        topic_remover: Arc<dyn TopicRemover>,
        instance: Option<String>,
    ) -> Self {
        let reporter = Reporter {
            controller: crate::manifests::FIELD_MANAGER.into(),
            instance,
        };
        Context {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            metrics,
            options,
            topic_remover,
            topic_cleanup_grace: Duration::from_secs(120),
            controllers: None,
        }
    }
}
