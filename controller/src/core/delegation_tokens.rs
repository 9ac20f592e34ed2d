//! Delegation tokens: the core's side, storing what brokers decided.

use super::ControllerCore;
use crate::command::{Command, Reply};
use crate::delegation_tokens::{self, DelegationToken};
use crate::error::ControllerError;
use crate::features::{DELEGATION_TOKENS_LEVEL, SKEIN_VERSION};

impl ControllerCore {
    /// Every delegation token by id.
    pub fn delegation_tokens(&self) -> &delegation_tokens::DelegationTokens {
        &self.image.delegation_tokens
    }

    /// Token records are a format of `skein.version` 4: a controller of an
    /// older release could not read a metadata log holding them.
    fn check_token_level(&self) -> Result<(), ControllerError> {
        let level = self.image.cluster.feature_level(SKEIN_VERSION);
        if level < DELEGATION_TOKENS_LEVEL {
            return Err(ControllerError::UnsupportedVersion(format!(
                "delegation tokens need {SKEIN_VERSION} {DELEGATION_TOKENS_LEVEL}; the cluster is finalized at {level} (kafka-features upgrade --feature {SKEIN_VERSION}={DELEGATION_TOKENS_LEVEL})"
            )));
        }
        Ok(())
    }

    pub(super) fn on_create_delegation_token(&mut self, token: DelegationToken) {
        let result = self.check_token_level().and_then(|()| {
            delegation_tokens::check_new(&token).map_err(ControllerError::InvalidRequest)?;
            if self.image.delegation_tokens.contains_key(&token.token_id) {
                return Err(ControllerError::InvalidRequest(format!(
                    "delegation token {} exists already",
                    token.token_id
                )));
            }
            Ok(())
        });
        if result.is_ok() {
            self.out.persist.push(Command::PersistDelegationToken {
                token_id: token.token_id.clone(),
                token: Some(token.clone()),
            });
            self.image
                .delegation_tokens
                .insert(token.token_id.clone(), token);
            self.out.publish = true;
        }
        self.reply(Reply::CreateDelegationToken { result });
    }

    /// Renewals and expiries: the token's expiry becomes `expiry_ms`
    /// (never past its maximum), or the token is removed (`None`).
    pub(super) fn on_set_delegation_token_expiry(
        &mut self,
        token_id: String,
        expiry_ms: Option<i64>,
    ) {
        let result = match self.image.delegation_tokens.get_mut(&token_id) {
            None => Err(ControllerError::DelegationTokenNotFound(token_id.clone())),
            Some(token) => {
                match expiry_ms {
                    Some(expiry) => {
                        token.expiry_ms = expiry.min(token.max_ms);
                        let token = Some(token.clone());
                        self.out.persist.push(Command::PersistDelegationToken {
                            token_id: token_id.clone(),
                            token,
                        });
                    }
                    None => {
                        self.image.delegation_tokens.remove(&token_id);
                        self.out.persist.push(Command::PersistDelegationToken {
                            token_id: token_id.clone(),
                            token: None,
                        });
                    }
                }
                self.out.publish = true;
                Ok(())
            }
        };
        self.reply(Reply::SetDelegationTokenExpiry { token_id, result });
    }
}
