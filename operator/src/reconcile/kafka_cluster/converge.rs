//! The steps that move a running cluster towards its spec, one at a time:
//! a rolling restart (or a volume's offline growth), then the feature
//! level, then the balancer, each only while nothing before it is in
//! progress (they all need the cluster settled).

use kube::runtime::events::EventType;

use super::state::{Cx, Found, Outcome};
use crate::error::Result;
use crate::reconcile::{balance, features, roll, storage};

/// Restarts one outdated broker pod, when nothing else is in progress.
pub async fn rolling_restart(cx: &Cx<'_>, found: &mut Found) -> Result<Outcome> {
    let (Some(rt), None) = (&found.controller, &found.progress) else {
        return Ok(Outcome::Continue);
    };
    let sts = found
        .applied_sts
        .as_ref()
        .expect("Apply runs before RollingRestart");
    // Volumes whose filesystem grows only offline restart their
    // broker once, under the same rules as a roll.
    let filesystem = match &found.volumes {
        Some(storage::VolumeReport::Resizing { restart, .. }) => restart.clone(),
        _ => Vec::new(),
    };
    let step = roll::rolling_restart_step(
        &cx.ctx.client,
        rt,
        cx.kc,
        &cx.desired,
        sts,
        &filesystem,
        cx.now.clone(),
    )
    .await?;
    if let Some(p) = step
        .progress
        .as_ref()
        .filter(|p| p.message.starts_with("restarting"))
    {
        cx.publish(
            EventType::Normal,
            "RestartingBroker",
            "RollingRestart",
            p.message.clone(),
        )
        .await;
    }
    if let Some(r) = &step.rollback {
        cx.publish(
            EventType::Warning,
            "ImageRolledBack",
            "RollingRestart",
            r.message.clone(),
        )
        .await;
    }
    found.progress = step.progress.clone();
    found.roll = step;
    Ok(Outcome::Continue)
}

/// spec.featureLevel, once nothing else is in progress.
pub async fn feature_level(cx: &Cx<'_>, found: &mut Found) -> Result<Outcome> {
    let Some(rt) = &found.controller else {
        return Ok(Outcome::Continue);
    };
    let mut f = features::feature_step(rt, cx.kc, &cx.desired, found.progress.is_some());
    if let Some(from) = f.raised_from {
        cx.publish(
            EventType::Normal,
            "FeatureLevelFinalized",
            "FinalizeFeatureLevel",
            format!(
                "{} finalized at {} (was {from}); releases that cannot run at it are refused from now on",
                skein_controller::features::SKEIN_VERSION,
                f.finalized
            ),
        )
        .await;
    }
    if found.progress.is_none() {
        found.progress = f.progress.take();
    }
    found.features = Some(f);
    Ok(Outcome::Continue)
}

/// The balancer, when nothing else is in progress; a plan it shows is
/// kept in the status meanwhile.
pub async fn balance(cx: &Cx<'_>, found: &mut Found) -> Result<Outcome> {
    found.balance = balance::BalanceStep {
        status: cx.kc.status.as_ref().and_then(|s| s.balance.clone()),
        ..Default::default()
    };
    if let (Some(rt), None) = (&found.controller, &found.progress) {
        found.balance = balance::balance_step(rt, cx.kc, &cx.desired, cx.now.0).await;
        found.progress = found.balance.progress.take();
    }
    Ok(Outcome::Continue)
}
