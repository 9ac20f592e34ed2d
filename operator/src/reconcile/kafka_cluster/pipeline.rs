//! The KafkaCluster reconcile as an ordered list of named steps ([`STEPS`]).
//! Each step reads the fixed inputs ([`Cx`]), takes what earlier steps
//! found and leaves its own part in [`Found`], and either continues or
//! stops the reconcile ([`Outcome`]). The order is the order of the API
//! writes, so it is part of the behaviour.

use super::state::{Cx, Found, Outcome};
use super::{admit, apply, converge, listeners, report};
use crate::error::Result;

/// One step of the KafkaCluster reconcile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Lists the cluster's Topics (a scale-down must fit them).
    Topics,
    /// Refuses a spec that cannot be applied.
    Validate,
    /// Starts the cluster's controller, or keeps it in session.
    StartController,
    /// Applies the external listeners' Services and Ingresses.
    ListenerServices,
    /// Makes or renews the listener certificates.
    Certificates,
    /// Makes the delegation token key Secret (spec.delegationTokens).
    DelegationTokenKey,
    /// Builds every object; reads the current StatefulSet.
    Build,
    /// Self-healing and the replication throttle.
    ControllerSettings,
    /// The StatefulSet size a scale allows now.
    Scale,
    /// Server-side applies the objects in their fixed order.
    Apply,
    /// Grows the broker volumes.
    Volumes,
    /// Restarts one outdated broker pod.
    RollingRestart,
    /// Finalizes spec.featureLevel.
    FeatureLevel,
    /// Plans and runs the balancer's moves.
    Balance,
    /// Takes the controller's view for the status.
    Observe,
    /// Writes the status, built from what the steps found.
    Status,
    /// Publishes the Events of what changed.
    Events,
}

/// The reconcile, in order.
pub const STEPS: &[Step] = &[
    Step::Topics,
    Step::Validate,
    Step::StartController,
    Step::ListenerServices,
    Step::Certificates,
    Step::DelegationTokenKey,
    Step::Build,
    Step::ControllerSettings,
    Step::Scale,
    Step::Apply,
    Step::Volumes,
    Step::RollingRestart,
    Step::FeatureLevel,
    Step::Balance,
    Step::Observe,
    Step::Status,
    Step::Events,
];

impl Step {
    /// The step's name, for logs.
    pub fn name(self) -> &'static str {
        match self {
            Step::Topics => "Topics",
            Step::Validate => "Validate",
            Step::StartController => "StartController",
            Step::ListenerServices => "ListenerServices",
            Step::Certificates => "Certificates",
            Step::DelegationTokenKey => "DelegationTokenKey",
            Step::Build => "Build",
            Step::ControllerSettings => "ControllerSettings",
            Step::Scale => "Scale",
            Step::Apply => "Apply",
            Step::Volumes => "Volumes",
            Step::RollingRestart => "RollingRestart",
            Step::FeatureLevel => "FeatureLevel",
            Step::Balance => "Balance",
            Step::Observe => "Observe",
            Step::Status => "Status",
            Step::Events => "Events",
        }
    }

    /// Runs this step alone.
    pub async fn run(self, cx: &Cx<'_>, found: &mut Found) -> Result<Outcome> {
        match self {
            Step::Topics => admit::topics(cx, found).await,
            Step::Validate => admit::validate(cx, found).await,
            Step::StartController => admit::start_controller(cx, found).await,
            Step::ListenerServices => listeners::listener_services(cx, found).await,
            Step::Certificates => listeners::certificates(cx, found).await,
            Step::DelegationTokenKey => listeners::delegation_token_key(cx, found).await,
            Step::Build => apply::build(cx, found).await,
            Step::ControllerSettings => apply::controller_settings(cx, found).await,
            Step::Scale => apply::scale(cx, found).await,
            Step::Apply => apply::apply_objects(cx, found).await,
            Step::Volumes => apply::volumes(cx, found).await,
            Step::RollingRestart => converge::rolling_restart(cx, found).await,
            Step::FeatureLevel => converge::feature_level(cx, found).await,
            Step::Balance => converge::balance(cx, found).await,
            Step::Observe => report::observe(cx, found).await,
            Step::Status => report::write_status(cx, found).await,
            Step::Events => report::events(cx, found).await,
        }
    }
}
