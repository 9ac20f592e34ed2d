//! Kept connections to the other brokers for one job (transaction markers,
//! transaction verification): one per broker, opened on first use over the
//! inter-broker listener's security, reopened when the other end closed it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::protocol::Request;
use tracing::debug;

use crate::inter_broker::InterBrokerSecurity;
use crate::metadata::MetadataCache;
use crate::replication::client::BrokerClient;

type Channel = Arc<tokio::sync::Mutex<Option<BrokerClient>>>;

/// One connection per broker, kept between calls.
pub struct BrokerChannels {
    /// Names the connections (`skein-broker-<id>-<job>` is their client id).
    job: &'static str,
    /// Where the other brokers are (the metadata image).
    metadata: Arc<MetadataCache>,
    /// This broker's id (in the client id).
    node_id: i32,
    security: InterBrokerSecurity,
    channels: Mutex<HashMap<i32, Channel>>,
}

impl BrokerChannels {
    pub fn new(
        job: &'static str,
        metadata: Arc<MetadataCache>,
        node_id: i32,
        security: InterBrokerSecurity,
    ) -> Self {
        BrokerChannels {
            job,
            metadata,
            node_id,
            security,
            channels: Mutex::default(),
        }
    }

    fn channel(&self, broker_id: i32) -> Channel {
        self.channels
            .lock()
            .expect("broker channels lock")
            .entry(broker_id)
            .or_default()
            .clone()
    }

    /// Sends `req` at `version` to broker `to` and returns its answer, or
    /// the error to count against every item of the request: the broker is
    /// not alive (`BROKER_NOT_AVAILABLE`), cannot be reached
    /// (`NETWORK_EXCEPTION`) or did not answer within `timeout`
    /// (`REQUEST_TIMED_OUT`). Calls to one broker go one at a time.
    pub async fn call<Req: Request>(
        &self,
        to: i32,
        req: &Req,
        version: i16,
        timeout: Duration,
    ) -> Result<Req::Response, ResponseError> {
        let Some(addr) = self
            .metadata
            .image()
            .brokers
            .get(&to)
            .filter(|b| b.alive)
            .map(|b| format!("{}:{}", b.host, b.port))
        else {
            return Err(ResponseError::BrokerNotAvailable);
        };
        let channel = self.channel(to);
        let mut conn = channel.lock().await;
        // A kept connection may have been closed by the other broker
        // meanwhile (connections.max.idle.ms): one more try on a fresh one.
        let mut reused = conn.is_some();
        loop {
            if conn.is_none() {
                let client_id = format!("skein-broker-{}-{}", self.node_id, self.job);
                match BrokerClient::connect(&addr, client_id, &self.security).await {
                    Ok(c) => *conn = Some(c),
                    Err(e) => {
                        debug!(to, %addr, job = self.job, error = %e, "cannot connect to broker");
                        return Err(ResponseError::NetworkException);
                    }
                }
            }
            let call = conn.as_mut().expect("connected").call(req, version);
            match tokio::time::timeout(timeout, call).await {
                Ok(Ok(r)) => return Ok(r),
                Ok(Err(e)) => {
                    debug!(to, job = self.job, error = %e, "inter-broker call failed");
                    *conn = None;
                    if std::mem::take(&mut reused) {
                        continue;
                    }
                    return Err(ResponseError::NetworkException);
                }
                Err(_) => {
                    *conn = None;
                    return Err(ResponseError::RequestTimedOut);
                }
            }
        }
    }
}
