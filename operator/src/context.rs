//! What every reconcile gets: the client, metrics, the event recorder, the
//! builder options and the way topic data is removed through a cluster.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::{Recorder, Reporter};
use kube::Client;

use crate::build::BuildOptions;
use crate::metrics::Metrics;

pub use crate::kafka_admin::{BoxFuture, TopicRemover};

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
            controller: crate::build::FIELD_MANAGER.into(),
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
