//! Taking up dynamic broker configs (`dynamic_config`) in a running
//! broker: the quotas, tiered storage and every hosted topic's log config
//! follow at once.

impl crate::broker::Broker {
    /// Takes up the dynamic broker configs of the metadata view if they
    /// changed: the log defaults of every hosted topic follow at once, the
    /// log cleaner at its next pass.
    pub fn apply_dynamic_configs(&self) {
        let layers = self.metadata.image().broker_configs.clone();
        match self.dynamic.update(&self.config, &layers) {
            Ok(false) => {}
            Ok(true) => {
                self.replication_quotas
                    .set(self.effective_config().replication_throttle);
                if let Some(remote) = &self.remote {
                    remote.set_quotas(&self.effective_config().tiered);
                }
                let (default, own) = crate::dynamic_config::layers(&layers, self.config.node_id);
                tracing::info!(
                    cluster_default = ?default,
                    broker = ?own,
                    "dynamic broker configs applied"
                );
                let mut topics: Vec<String> = self
                    .replicas
                    .all()
                    .iter()
                    .map(|p| p.topic.clone())
                    .collect();
                topics.sort();
                topics.dedup();
                for t in topics {
                    self.apply_topic_config(&t);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot apply the dynamic broker configs: the previous ones stay in force")
            }
        }
    }
}
