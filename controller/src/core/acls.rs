//! `CreateAcls` / `DeleteAcls`: the core's side, keeping the cluster's ACLs.

use super::ControllerCore;
use crate::acls::{self, AclBinding, AclFilter, Acls};
use crate::command::{Command, Reply};
use crate::error::ControllerError;

impl ControllerCore {
    /// Every ACL of the cluster.
    pub fn acls(&self) -> &Acls {
        &self.image.acls
    }

    /// Adds bindings (ones already there are kept once). Refused whole if
    /// one is invalid: brokers check each before sending, so a client gets
    /// an error per binding.
    pub(super) fn on_create_acls(&mut self, bindings: Vec<AclBinding>) {
        let result = bindings
            .iter()
            .try_for_each(|b| acls::check_binding(b).map_err(ControllerError::InvalidRequest));
        if result.is_ok() {
            let before = self.image.acls.len();
            self.image.acls.extend(bindings);
            if self.image.acls.len() != before {
                self.persist_acls();
            }
        }
        self.reply(Reply::CreateAcls { result });
    }

    /// Removes every binding some filter matches; answers, per filter, the
    /// bindings it matched.
    pub(super) fn on_delete_acls(&mut self, filters: Vec<AclFilter>) {
        let matched: Vec<Vec<AclBinding>> = filters
            .iter()
            .map(|f| {
                self.image
                    .acls
                    .iter()
                    .filter(|b| f.matches(b))
                    .cloned()
                    .collect()
            })
            .collect();
        let before = self.image.acls.len();
        self.image
            .acls
            .retain(|b| !filters.iter().any(|f| f.matches(b)));
        if self.image.acls.len() != before {
            self.persist_acls();
        }
        self.reply(Reply::DeleteAcls {
            result: Ok(matched),
        });
    }

    fn persist_acls(&mut self) {
        self.out
            .persist
            .push(Command::PersistAcls(self.image.acls.clone()));
        self.out.publish = true;
    }
}
