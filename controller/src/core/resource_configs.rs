//! Client-metrics subscriptions and group configs: the core's side,
//! storing what brokers checked.

use std::collections::BTreeMap;

use super::ControllerCore;
use crate::command::{Command, Reply};
use crate::error::ControllerError;
use crate::features::{CONFIG_RESOURCES_LEVEL, SKEIN_VERSION};
use crate::resource_configs::{check_set, ConfigResourceKind, ResourceConfigs};

impl ControllerCore {
    /// Every client-metrics subscription and group config.
    pub fn resource_configs(&self) -> &ResourceConfigs {
        &self.image.resource_configs
    }

    pub(super) fn on_alter_resource_configs(
        &mut self,
        kind: ConfigResourceKind,
        name: String,
        configs: BTreeMap<String, String>,
    ) {
        let level = self.image.cluster.feature_level(SKEIN_VERSION);
        let result = if level < CONFIG_RESOURCES_LEVEL {
            Err(ControllerError::UnsupportedVersion(format!(
                "client-metrics and group configs need {SKEIN_VERSION} {CONFIG_RESOURCES_LEVEL}; the cluster is finalized at {level} (kafka-features upgrade --feature {SKEIN_VERSION}={CONFIG_RESOURCES_LEVEL})"
            )))
        } else {
            check_set(&name, &configs).map_err(ControllerError::InvalidRequest)
        };
        let current = self.image.resource_configs.get(kind, &name);
        if result.is_ok() && current.cloned().unwrap_or_default() != configs {
            self.image
                .resource_configs
                .set(kind, &name, configs.clone());
            self.out.persist.push(Command::PersistResourceConfigs {
                kind,
                name,
                configs,
            });
            self.out.publish = true;
        }
        self.reply(Reply::AlterResourceConfigs { result });
    }
}
