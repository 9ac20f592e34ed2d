//! Errors of the reconcilers, one variant per pipeline step, so the failure
//! metric and the logs say where a reconcile stopped.

use kube::runtime::finalizer;

/// Why a cluster's controller could not be started in the operator.
#[derive(Debug, thiserror::Error)]
pub enum ControllerStartError {
    #[error("controller metadata: {0}")]
    Image(#[source] std::io::Error),
    /// The control plane's certificates could not be made or read.
    #[error("control-plane TLS: {0}")]
    ControlTls(String),
    /// The key that seals SCRAM credentials in the metadata log is not
    /// usable (its Secret someone else's, malformed, replaced, or not the
    /// key the log's records were sealed with): the cluster is refused with
    /// a condition until the Secret is put right.
    #[error("controller metadata key: {0}")]
    MetadataKey(String),
}

/// Why a deleted Topic's data could not be removed (yet).
#[derive(Debug, thiserror::Error)]
pub enum TopicRemovalError {
    /// The cluster's controller (in this operator) refused or failed.
    #[error(transparent)]
    Controller(#[from] skein_controller::ControlPlaneError),
    /// No controller runs for the cluster in this operator (not started
    /// yet, or stopped).
    #[error("{0}")]
    Unavailable(String),
    /// The KafkaCluster itself could not be read.
    #[error("reading the cluster: {0}")]
    Cluster(#[source] Box<Error>),
}

/// A reconcile failure: the controller logs it, counts it and retries.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("object has no namespace")]
    NotNamespaced,
    #[error("reading {what}: {source}")]
    Dereference {
        what: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error("applying {kind} {name}: {source}")]
    Apply {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("writing status: {0}")]
    Status(#[source] kube::Error),
    #[error("removing topic {topic} through the cluster: {source}")]
    TopicRemoval {
        topic: String,
        #[source]
        source: TopicRemovalError,
    },
    #[error("starting the cluster's controller: {0}")]
    ControllerStart(#[from] ControllerStartError),
    #[error("topic {topic:?}: {source}")]
    Controller {
        topic: String,
        #[source]
        source: skein_controller::ControlPlaneError,
    },
    #[error("user {user:?}: {source}")]
    UserController {
        user: String,
        #[source]
        source: skein_controller::ControlPlaneError,
    },
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<finalizer::Error<Error>>),
    /// The client listeners' certificates could not be made, read or written.
    #[error("listener certificates: {0}")]
    Certificates(String),
}

impl Error {
    /// Short label for the failure metric.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::NotNamespaced => "not_namespaced",
            Error::Dereference { .. } => "dereference",
            Error::Apply { .. } => "apply",
            Error::Status(_) => "status",
            Error::TopicRemoval { .. } => "topic_removal",
            Error::Certificates(_) => "certificates",
            Error::ControllerStart(_) | Error::Controller { .. } | Error::UserController { .. } => {
                "controller"
            }
            Error::Finalizer(e) => match e.as_ref() {
                finalizer::Error::ApplyFailed(inner) | finalizer::Error::CleanupFailed(inner) => {
                    inner.metric_label()
                }
                _ => "finalizer",
            },
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
