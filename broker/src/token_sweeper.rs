//! Removes expired delegation tokens on a timer.

use std::sync::Arc;
use std::time::Duration;

use crate::broker::Broker;

impl Broker {
    /// Removes expired tokens every `delegation.token.expiry.check.interval.ms`
    /// (Kafka's controller sweeps them; in Skein the broker the view names as
    /// controller does, the others leave it to that one). A token is refused
    /// from the moment it expires, whether or not it was swept.
    pub(crate) fn spawn_token_sweeper(self: &Arc<Self>) {
        if !self.delegation_tokens.enabled() {
            return;
        }
        let every = Duration::from_millis(
            self.delegation_tokens
                .config
                .expiry_check_interval_ms
                .max(100),
        );
        let me = Arc::downgrade(self);
        self.spawn(tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(b) = me.upgrade() else { return };
                let view = b.metadata.image();
                if view.controller_id != b.config.node_id {
                    continue;
                }
                let now = crate::system::now_ms();
                let expired: Vec<String> = view
                    .delegation_tokens
                    .values()
                    .filter(|t| t.expired(now))
                    .map(|t| t.token_id.clone())
                    .collect();
                drop(view);
                for token_id in expired {
                    let b = b.clone();
                    let id = token_id.clone();
                    let result =
                        tokio::task::spawn_blocking(move || b.metadata.set_delegation_token_expiry(&id, None))
                            .await;
                    match result {
                        Ok(Ok(())) => tracing::info!(%token_id, "expired delegation token removed"),
                        Ok(Err(e)) => {
                            tracing::debug!(%token_id, error = %e, "expired delegation token not removed")
                        }
                        Err(_) => return,
                    }
                }
            }
        }));
    }
}
