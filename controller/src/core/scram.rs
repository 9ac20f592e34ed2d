//! `AlterUserScramCredentials`: the core's side, storing salted credentials.

use std::collections::BTreeSet;

use super::ControllerCore;
use crate::command::{Command, Reply};
use crate::error::ControllerError;
use crate::scram::{self, ScramMechanism, ScramUpsertion};

impl ControllerCore {
    /// Every user's SCRAM credentials.
    pub fn scram_credentials(&self) -> &crate::scram::ScramCredentials {
        &self.image.scram_credentials
    }

    pub(super) fn on_alter_scram_credentials(
        &mut self,
        upsertions: Vec<ScramUpsertion>,
        deletions: Vec<(String, ScramMechanism)>,
    ) {
        let result = Self::check_scram_alteration(&upsertions, &deletions);
        if result.is_ok() {
            let mut touched = BTreeSet::new();
            for (user, mechanism) in deletions {
                if let Some(creds) = self.image.scram_credentials.get_mut(&user) {
                    creds.remove(&mechanism);
                    touched.insert(user);
                }
            }
            for u in upsertions {
                self.image
                    .scram_credentials
                    .entry(u.user.clone())
                    .or_default()
                    .insert(u.mechanism, u.credential);
                touched.insert(u.user);
            }
            for user in touched {
                let credentials = match self.image.scram_credentials.get(&user) {
                    Some(c) if !c.is_empty() => c.clone(),
                    _ => {
                        self.image.scram_credentials.remove(&user);
                        Default::default()
                    }
                };
                self.out
                    .persist
                    .push(Command::PersistScramCredentials { user, credentials });
            }
            self.out.publish = true;
        }
        self.reply(Reply::AlterScramCredentials { result });
    }

    /// The whole request is refused if one entry is invalid or one
    /// (user, mechanism) appears twice.
    fn check_scram_alteration(
        upsertions: &[ScramUpsertion],
        deletions: &[(String, ScramMechanism)],
    ) -> Result<(), ControllerError> {
        let mut seen = BTreeSet::new();
        for (user, mechanism) in deletions
            .iter()
            .map(|(u, m)| (u, m))
            .chain(upsertions.iter().map(|u| (&u.user, &u.mechanism)))
        {
            if !seen.insert((user, mechanism)) {
                return Err(ControllerError::InvalidRequest(format!(
                    "credential {mechanism} of user '{user}' appears more than once"
                )));
            }
        }
        if let Some((user, _)) = deletions.iter().find(|(u, _)| u.is_empty()) {
            return Err(ControllerError::InvalidRequest(format!(
                "invalid user name '{user}'"
            )));
        }
        for u in upsertions {
            scram::check_upsertion(u).map_err(ControllerError::InvalidRequest)?;
        }
        Ok(())
    }
}
