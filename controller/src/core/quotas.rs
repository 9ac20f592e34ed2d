//! `AlterClientQuotas`: the core's side, storing quota values by entity.

use super::ControllerCore;
use crate::command::{Command, Reply};
use crate::error::ControllerError;

impl ControllerCore {
    /// Every entity's client quotas.
    pub fn client_quotas(&self) -> &crate::quotas::ClientQuotas {
        &self.image.client_quotas
    }

    pub(super) fn on_alter_client_quotas(&mut self, changes: Vec<crate::quotas::QuotaChange>) {
        let result = changes
            .iter()
            .try_for_each(crate::quotas::check_change)
            .map_err(ControllerError::InvalidRequest);
        if result.is_ok() {
            let quotas = &mut self.image.client_quotas.0;
            for c in changes {
                match c.value {
                    Some(v) => {
                        quotas
                            .entry(c.entity)
                            .or_default()
                            .insert(c.key, crate::quotas::QuotaValue(v));
                    }
                    None => {
                        if let Some(values) = quotas.get_mut(&c.entity) {
                            values.remove(&c.key);
                            if values.is_empty() {
                                quotas.remove(&c.entity);
                            }
                        }
                    }
                }
            }
            self.out.persist.push(Command::PersistClientQuotas(
                self.image.client_quotas.clone(),
            ));
            self.out.publish = true;
        }
        self.reply(Reply::AlterClientQuotas { result });
    }
}
