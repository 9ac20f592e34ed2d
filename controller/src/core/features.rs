//! Finalizing feature levels ([`crate::features`]), and the registration
//! check that keeps a broker of a release too old for the finalized level
//! out.

use std::collections::BTreeMap;

use super::ControllerCore;
use crate::command::{Command, Reply};
use crate::error::ControllerError;
use crate::features::supported;
use crate::model::{BrokerId, BrokerSoftware};

impl ControllerCore {
    /// [`crate::Event::UpdateFeature`].
    pub(super) fn on_update_feature(&mut self, feature: String, level: i16, validate_only: bool) {
        let result = self.check_feature_update(&feature, level);
        let result = match result {
            Ok(current) if current != level && !validate_only => {
                self.image
                    .cluster
                    .finalized_features
                    .insert(feature.clone(), level);
                self.out
                    .persist
                    .push(Command::PersistCluster(self.image.cluster.clone()));
                self.out.publish = true;
                tracing::info!(%feature, from = current, to = level, "feature level finalized");
                Ok(current)
            }
            other => other,
        };
        self.reply(Reply::UpdateFeature { feature, result });
    }

    /// The current level if `feature` may be finalized at `level`.
    fn check_feature_update(&self, feature: &str, level: i16) -> Result<i16, ControllerError> {
        let fail = |why: String| Err(ControllerError::FeatureUpdateFailed(why));
        let Some((min, max)) = crate::features::supported_range(feature) else {
            let known: Vec<String> = supported().into_iter().map(|f| f.name).collect();
            return fail(format!(
                "unknown feature {feature:?} (Skein has {})",
                known.join(", ")
            ));
        };
        let current = self.image.cluster.feature_level(feature);
        if level < current {
            return fail(format!(
                "{feature} is finalized at {current}; a level is never lowered (what was written at it may need it)"
            ));
        }
        if !(min..=max).contains(&level) {
            return fail(format!(
                "this controller supports {feature} {min}..={max}, not {level}"
            ));
        }
        // Every registered broker, fenced ones too: one that returns must be
        // able to run at the level.
        let lacking: Vec<String> = self
            .image
            .brokers
            .values()
            .filter_map(|b| {
                let (min, max) = b.software.supported(feature);
                (!(min..=max).contains(&level))
                    .then(|| format!("broker {} ({})", b.id, describe(&b.software, feature)))
            })
            .collect();
        if !lacking.is_empty() {
            return fail(format!(
                "{} cannot run at {feature} {level}: roll them to a newer release first",
                lacking.join(", ")
            ));
        }
        Ok(current)
    }

    /// Why each broker's latest registration was refused, for brokers that
    /// have not registered since.
    pub fn refused_registrations(&self) -> &BTreeMap<BrokerId, String> {
        &self.refused
    }

    /// Why broker `broker` may not register: its release cannot run at a
    /// level the cluster is finalized at (as Kafka's controller refuses a
    /// broker lacking a finalized feature level: a broker that does not know
    /// `transaction.version` 2 would neither add a produced partition to its
    /// transaction nor bump epochs, and its partitions would keep
    /// transactions open that no coordinator knows).
    pub(super) fn refuse_registration(
        &self,
        broker: BrokerId,
        software: &BrokerSoftware,
    ) -> Option<ControllerError> {
        supported().into_iter().find_map(|f| {
            let feature = f.name.as_str();
            let level = self.image.cluster.feature_level(feature);
            let (min, max) = software.supported(feature);
            (!(min..=max).contains(&level)).then(|| {
                ControllerError::UnsupportedVersion(format!(
                    "broker {broker} ({}) cannot run at {feature} {level}, at which the cluster is finalized: run a release that supports it",
                    describe(software, feature)
                ))
            })
        })
    }
}

/// "release 0.2.0, skein.version 1..=2", for messages.
fn describe(software: &BrokerSoftware, feature: &str) -> String {
    let (min, max) = software.supported(feature);
    let release = software
        .version
        .as_deref()
        .map_or("a release before 0.2.0".to_string(), |v| {
            format!("release {v}")
        });
    format!("{release}, {feature} {min}..={max}")
}
