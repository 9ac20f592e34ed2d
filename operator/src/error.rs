//! Errors of the reconcilers, one variant per pipeline step, so the failure
//! metric and the logs say where a reconcile stopped.

use kube::runtime::finalizer;

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
    #[error("removing topic {topic} through the cluster: {message}")]
    TopicRemoval { topic: String, message: String },
    #[error("cluster controller: {0}")]
    Controller(String),
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<finalizer::Error<Error>>),
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
            Error::Controller(_) => "controller",
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
