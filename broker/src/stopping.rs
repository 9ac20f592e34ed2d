//! How a broker stops: Kafka's controlled shutdown (its leaderships and ISR
//! memberships moved away while it still serves clients), then its logs
//! flushed and closed with a clean-shutdown marker; or, for a crash test,
//! at once.

use std::sync::Arc;
use std::time::Duration;

use tracing::{info, warn};

use crate::broker::{Broker, Stop};

impl Broker {
    /// Kafka's controlled shutdown: asks the controller to move this
    /// broker's leaderships and ISR memberships away, until it leads
    /// nothing or `controlled.shutdown.timeout.ms` runs out. Clients are
    /// still served meanwhile (they follow the leaders as they move); runs
    /// once, whoever calls it first (the server before it closes its
    /// listeners, or [`Broker::stop`]).
    pub async fn controlled_shutdown(self: &Arc<Self>) {
        if self.combined
            || self
                .shut_down_controlled
                .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        let b = self.clone();
        let timeout = Duration::from_millis(self.config.controlled_shutdown_timeout_ms);
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let b = b.clone();
            // Each attempt is bounded by the deadline too: a controller
            // that is gone (its cluster deleted, the operator down) may
            // never answer, and SIGTERM must still stop the broker.
            let attempt = tokio::time::timeout_at(
                deadline,
                tokio::task::spawn_blocking(move || b.metadata.controlled_shutdown()),
            )
            .await;
            match attempt {
                Ok(Ok(Ok(()))) => {
                    info!("controlled shutdown: this broker leads nothing now");
                    break;
                }
                Ok(Ok(Err(e))) if tokio::time::Instant::now() < deadline => {
                    info!(error = %e, "controlled shutdown not complete yet");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Ok(other) => {
                    warn!(result = ?other.map(|r| r.err()), "controlled shutdown gave up");
                    break;
                }
                Err(_) => {
                    warn!("controlled shutdown gave up: the controller did not answer in time");
                    break;
                }
            }
        }
    }

    /// Stops the broker. `Graceful` moves leadership to other brokers
    /// first (controlled shutdown) and closes the logs cleanly.
    pub async fn stop(self: &Arc<Self>, how: Stop) {
        let id = self.config.node_id;
        if how == Stop::Crash {
            // Dead at once: no role change, request or fetcher from now on.
            self.stopped.send_replace(true);
        }
        if how == Stop::Graceful {
            self.controlled_shutdown().await;
        }
        self.metadata.controller().detach(id);
        if how == Stop::Graceful && !self.combined {
            let b = self.clone();
            let _ = tokio::time::timeout(
                Duration::from_secs(2),
                tokio::task::spawn_blocking(move || b.metadata.leave()),
            )
            .await;
        }
        self.stopped.send_replace(true);
        for t in self.tasks.lock().expect("tasks lock").drain(..) {
            t.abort();
        }
        match how {
            Stop::Graceful => {
                let b = self.clone();
                let _ = tokio::task::spawn_blocking(move || b.shutdown()).await;
            }
            Stop::Crash => self.replicas.stop_fetchers(),
        }
    }

    /// Flushes and closes every log.
    pub fn shutdown(&self) {
        self.replicas.shutdown();
        info!("logs closed");
        if let Err(e) =
            crate::clean_shutdown::write(&self.config.data_dir, self.metadata.broker_epoch())
        {
            warn!(error = %e, "cannot write the clean-shutdown marker; the next start counts as unclean");
        }
    }
}
