//! Dynamic broker configs: the core's side, storing values by resource.

use super::ControllerCore;
use crate::broker_configs::{check_change, BrokerConfigChange, BrokerConfigs};
use crate::command::{Command, Reply};
use crate::error::ControllerError;

impl ControllerCore {
    /// The dynamic broker configs.
    pub fn broker_configs(&self) -> &BrokerConfigs {
        &self.image.broker_configs
    }

    pub(super) fn on_alter_broker_configs(&mut self, changes: Vec<BrokerConfigChange>) {
        let result = changes
            .iter()
            .try_for_each(check_change)
            .map_err(ControllerError::InvalidRequest);
        if result.is_ok() {
            self.image.broker_configs.apply(changes);
            self.out.persist.push(Command::PersistBrokerConfigs(
                self.image.broker_configs.clone(),
            ));
            self.out.publish = true;
        }
        self.reply(Reply::AlterBrokerConfigs { result });
    }
}
