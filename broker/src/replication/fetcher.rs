//! Replica fetchers (Kafka's `ReplicaFetcherManager` and
//! `ReplicaFetcherThread`): one task per leader broker fetches every
//! partition this broker follows from it, with the ordinary Fetch API and
//! `replica_id` set, appends what it gets with `append_as_follower`, and
//! truncates a divergent tail first when the leader reports one (Fetch v12+
//! diverging epoch, KIP-320). Each task keeps a fetch session with its
//! leader (KIP-227, `session.rs`): partitions with nothing new are left out
//! of both requests and responses.
//!
//! A round costs what changed, not what is followed: between full rebuilds
//! (a new assignment, a partition sitting out, a follower throttle, a
//! session in doubt, and every [`FULL_REBUILD_EVERY`] for what moved on its
//! own, such as a log start after retention) a request offers the session
//! only the partitions the last response answered, the only ones whose
//! fetch state the fetcher itself changed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::{BrokerId, FetchRequest};
use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::client::{BrokerClient, ClientError};
use super::session::SessionHandler;
use crate::partition::TopicPartition;
use crate::partition::{Partition, TruncateTo};
use crate::replication_throttle::FollowerThrottle;

/// Fetch v12: the first version with diverging epochs; topics by name.
/// v15 (KIP-903): the follower's broker epoch rides along in
/// `replica_state`, so the leader's ISR expansion names the incarnation that
/// caught up and the controller refuses it if that broker restarted since.
const FETCH_VERSION: i16 = 15;

/// The longest a fetcher goes without rebuilding its request from every
/// partition it follows.
const FULL_REBUILD_EVERY: Duration = Duration::from_secs(10);

/// Finds the `host:port` of a broker id.
pub type AddressBook = Arc<dyn Fn(i32) -> Option<String> + Send + Sync>;

/// This broker's current broker epoch (it changes on every registration).
pub type EpochSource = Arc<dyn Fn() -> u64 + Send + Sync>;

/// Settings of the fetchers (Kafka's `replica.fetch.*`).
#[derive(Debug, Clone)]
pub struct FetcherConfig {
    pub local_id: i32,
    /// `replica.fetch.wait.max.ms`
    pub max_wait_ms: i32,
    /// `replica.fetch.max.bytes` (per partition)
    pub partition_max_bytes: i32,
    /// `replica.fetch.response.max.bytes`
    pub response_max_bytes: i32,
    /// `replica.fetch.backoff.ms`
    pub backoff_ms: u64,
    /// The inter-broker listener's protocol, client side.
    pub security: crate::inter_broker::InterBrokerSecurity,
    /// KIP-405: where a follower behind its leader's local log start finds
    /// the remote state to start from.
    pub remote: Option<Arc<crate::remote_log::RemoteLog>>,
}

/// The partitions one fetcher task fetches, with the leader epoch each was
/// assigned at, and a count of changes to them.
#[derive(Default)]
struct Assignment {
    map: HashMap<TopicPartition, (Arc<Partition>, i32)>,
    generation: u64,
}

type Assigned = Arc<Mutex<Assignment>>;

struct Fetcher {
    partitions: Assigned,
    wake: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

/// Every fetcher of this broker, keyed by leader.
pub struct FetcherManager {
    config: FetcherConfig,
    throttle: FollowerThrottle,
    addresses: AddressBook,
    epoch: EpochSource,
    fetchers: Mutex<HashMap<i32, Fetcher>>,
    /// Set by `shutdown`: a stopped (or crashed) broker starts no fetcher
    /// again, even if a role change still reaches it.
    closed: std::sync::atomic::AtomicBool,
}

impl FetcherManager {
    pub fn new(
        config: FetcherConfig,
        throttle: FollowerThrottle,
        addresses: AddressBook,
        epoch: EpochSource,
    ) -> Self {
        Self {
            config,
            throttle,
            addresses,
            epoch,
            fetchers: Mutex::new(HashMap::new()),
            closed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Fetches `part` from `leader` from now on (and from nowhere else).
    pub fn add(&self, leader: i32, part: Arc<Partition>, leader_epoch: i32) {
        let tp = (part.topic.clone(), part.index);
        let mut fetchers = self.fetchers.lock().expect("fetchers lock");
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        remove_from(&mut fetchers, &tp, Some(leader));
        let f = fetchers.entry(leader).or_insert_with(|| {
            let partitions: Assigned = Arc::default();
            let wake = Arc::new(Notify::new());
            let task = tokio::spawn(run(
                self.config.clone(),
                self.throttle.clone(),
                leader,
                self.addresses.clone(),
                self.epoch.clone(),
                partitions.clone(),
                wake.clone(),
            ));
            Fetcher {
                partitions,
                wake,
                task,
            }
        });
        let mut assigned = f.partitions.lock().expect("fetcher partitions lock");
        assigned.map.insert(tp, (part, leader_epoch));
        assigned.generation += 1;
        drop(assigned);
        f.wake.notify_one();
    }

    /// Stops fetching `tp`.
    pub fn remove(&self, tp: &TopicPartition) {
        let mut fetchers = self.fetchers.lock().expect("fetchers lock");
        remove_from(&mut fetchers, tp, None);
    }

    /// Stops every fetcher.
    pub fn shutdown(&self) {
        let mut fetchers = self.fetchers.lock().expect("fetchers lock");
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        for (_, f) in fetchers.drain() {
            f.task.abort();
        }
    }
}

fn remove_from(fetchers: &mut HashMap<i32, Fetcher>, tp: &TopicPartition, keep: Option<i32>) {
    let mut idle = Vec::new();
    for (leader, f) in fetchers.iter() {
        if Some(*leader) == keep {
            continue;
        }
        let mut parts = f.partitions.lock().expect("fetcher partitions lock");
        if parts.map.remove(tp).is_some() {
            parts.generation += 1;
        }
        if parts.map.is_empty() {
            idle.push(*leader);
        }
    }
    for leader in idle {
        if let Some(f) = fetchers.remove(&leader) {
            f.task.abort();
        }
    }
}

/// Partitions whose last fetch failed sit out until their backoff ends
/// (Kafka's delayed partitions) while the others go on: one partition
/// moving to another leader does not pause the thousands still here. A
/// delay holds for the leader epoch it was taken at: the controller's next
/// instruction for the partition fetches at once.
#[derive(Default)]
struct Delayed(HashMap<(uuid::Uuid, i32), (i32, Instant)>);

impl Delayed {
    fn delay(&mut self, part: &Partition, leader_epoch: i32, until: Instant) {
        self.0
            .insert((part.topic_id, part.index), (leader_epoch, until));
    }

    /// Leaves in `assigned` the partitions not sitting out at `now`; when
    /// none is left, the instant the first delay ends.
    fn keep_ready(
        &mut self,
        assigned: &mut Vec<(Arc<Partition>, i32)>,
        now: Instant,
    ) -> Option<Instant> {
        if self.0.is_empty() {
            return None;
        }
        self.0.retain(|_, (_, until)| *until > now);
        assigned.retain(|(p, e)| {
            self.0
                .get(&(p.topic_id, p.index))
                .is_none_or(|(epoch, _)| epoch != e)
        });
        match assigned.is_empty() {
            true => self.0.values().map(|(_, until)| *until).min(),
            false => None,
        }
    }
}

/// One fetcher task: fetch, apply, repeat; reconnect with backoff on error.
async fn run(
    config: FetcherConfig,
    throttle: FollowerThrottle,
    leader: i32,
    addresses: AddressBook,
    epoch: EpochSource,
    partitions: Assigned,
    wake: Arc<Notify>,
) {
    let backoff = Duration::from_millis(config.backoff_ms.max(10));
    let mut conn: Option<BrokerClient> = None;
    // Storage and authentication errors: logged once per key every 10 s.
    let storage_errors = crate::warn_throttle::WarnThrottle::new(Duration::from_secs(10));
    let mut session = SessionHandler::default();
    let mut delayed = Delayed::default();
    // Every followed partition as of the last full rebuild, and that
    // rebuild's assignment generation and time.
    let mut follow: HashMap<(uuid::Uuid, i32), (Arc<Partition>, i32)> = HashMap::new();
    let mut rebuilt: Option<(u64, Instant)> = None;
    // The partitions the last response answered.
    let mut answered: Vec<(uuid::Uuid, i32)> = Vec::new();
    loop {
        let generation = partitions
            .lock()
            .expect("fetcher partitions lock")
            .generation;
        let full = session.needs_full()
            || !delayed.0.is_empty()
            || throttle.quota.limit().is_some()
            || rebuilt.is_none_or(|(g, at)| g != generation || at.elapsed() >= FULL_REBUILD_EVERY);
        let mut assigned: Vec<(Arc<Partition>, i32)> = if full {
            let a = partitions.lock().expect("fetcher partitions lock");
            rebuilt = Some((a.generation, Instant::now()));
            a.map.values().cloned().collect()
        } else {
            answered
                .iter()
                .filter_map(|k| follow.get(k).cloned())
                .collect()
        };
        if full {
            follow = assigned
                .iter()
                .map(|(p, e)| ((p.topic_id, p.index), (p.clone(), *e)))
                .collect();
        }
        if full && assigned.is_empty() {
            delayed = Delayed::default();
            rebuilt = None;
            wake.notified().await;
            continue;
        }
        if let Some(wake_at) = delayed.keep_ready(&mut assigned, Instant::now()) {
            rebuilt = None;
            tokio::select! {
                _ = tokio::time::sleep_until(wake_at) => {}
                _ = wake.notified() => {}
            }
            continue;
        }
        if conn.is_none() {
            let Some(addr) = addresses(leader) else {
                debug!(leader, "leader address unknown; waiting");
                tokio::time::sleep(backoff).await;
                continue;
            };
            let connect = BrokerClient::connect(
                &addr,
                format!("replica-{}", config.local_id),
                &config.security,
            );
            match tokio::time::timeout(Duration::from_secs(5), connect).await {
                Ok(Ok(c)) => conn = Some(c),
                Ok(Err(e @ ClientError::Auth(_))) => {
                    // A configuration problem, not a passing one: say so.
                    if storage_errors.allow(&format!("auth {leader}")).is_some() {
                        warn!(leader, %addr, error = %e, "cannot authenticate to the leader");
                    }
                    tokio::time::sleep(backoff).await;
                    continue;
                }
                Ok(Err(e)) => {
                    debug!(leader, %addr, error = %e, "cannot connect to leader");
                    tokio::time::sleep(backoff).await;
                    continue;
                }
                Err(_) => {
                    debug!(leader, %addr, "connecting to leader timed out");
                    continue;
                }
            }
        }
        // Over the follower throttle: the throttled replicas sit this
        // fetch out (Kafka's `shouldFollowerThrottle`).
        if throttle.quota.exceeded() {
            let before = assigned.len();
            assigned.retain(|(p, _)| !(throttle.throttled)(&p.topic, p.index));
            throttle.quota.held(before - assigned.len());
            if assigned.is_empty() {
                tokio::time::sleep(backoff.min(Duration::from_millis(100))).await;
                continue;
            }
        }
        let req = build_request(&config, epoch(), &assigned, full, &mut session);
        let client = conn.as_mut().expect("connected above");
        let timeout = Duration::from_millis(config.max_wait_ms.max(0) as u64 + 10_000);
        let resp = match tokio::time::timeout(timeout, client.call(&req, FETCH_VERSION)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                debug!(leader, error = %e, "fetch from leader failed");
                conn = None;
                session.failed();
                tokio::time::sleep(backoff).await;
                continue;
            }
            Err(_) => {
                debug!(leader, "fetch from leader timed out");
                conn = None;
                session.failed();
                continue;
            }
        };
        session.handle(&resp);
        if resp.error_code != 0 {
            debug!(leader, code = resp.error_code, "fetch refused");
            // A session the leader no longer knows (it restarted, or
            // evicted it): the next fetch opens a new one at once.
            if !SessionHandler::is_session_error(resp.error_code) {
                tokio::time::sleep(backoff).await;
            }
            continue;
        }
        // v13+ names topics by id only. An incremental response carries
        // the few partitions with news: only those are looked up (a map of
        // every followed partition, built each round, was most of an idle
        // follower's work at tens of thousands of partitions).
        answered = resp
            .responses
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic_id, p.partition_index)))
            .collect();
        for t in resp.responses {
            for pd in t.partitions {
                let Some((part, epoch)) = follow.get(&(t.topic_id, pd.partition_index)) else {
                    continue;
                };
                let tp = (part.topic.as_str(), part.index);
                let bytes = pd.records.as_ref().map_or(0, |r| r.len());
                if bytes > 0 && throttle.quota.limit().is_some() && (throttle.throttled)(tp.0, tp.1)
                {
                    throttle.quota.record(bytes);
                }
                if let Err(e) = apply(part, *epoch, pd, config.remote.as_ref()).await {
                    match &e {
                        // A full disk or an I/O error: this replica falls
                        // out of the ISR, and the operator must hear why.
                        ApplyError::Local(a) if a.code == ResponseError::KafkaStorageError => {
                            let key = format!("{} {}", tp.0, tp.1);
                            if let Some(left_out) = storage_errors.allow(&key) {
                                tracing::error!(leader, topic = %tp.0, partition = tp.1, error = %a.message, left_out, "cannot write replicated records to the log");
                            }
                        }
                        _ => {
                            debug!(leader, topic = %tp.0, partition = tp.1, error = %e, "replica fetch not applied")
                        }
                    }
                    // Usually a leadership change the controller is about
                    // to tell us.
                    delayed.delay(part, *epoch, Instant::now() + backoff);
                }
            }
        }
    }
}

/// A fetch of `assigned`: every partition followed (`full`), or those that
/// may have changed since the last request.
fn build_request(
    config: &FetcherConfig,
    broker_epoch: u64,
    assigned: &[(Arc<Partition>, i32)],
    full: bool,
    session: &mut SessionHandler,
) -> FetchRequest {
    let wanted = assigned
        .iter()
        .map(|(part, epoch)| {
            let (leo, last_epoch, log_start) = part.follower_fetch_state();
            let mut fp = FetchPartition::default();
            fp.partition = part.index;
            fp.current_leader_epoch = *epoch;
            fp.fetch_offset = leo;
            fp.last_fetched_epoch = last_epoch;
            fp.log_start_offset = log_start;
            fp.partition_max_bytes = config.partition_max_bytes;
            ((part.topic_id, part.index), fp)
        })
        .collect();
    let mut req = FetchRequest::default();
    // v15 moved the replica id into `replica_state`; the old field is -1.
    req.replica_id = BrokerId(-1);
    req.replica_state.replica_id = BrokerId(config.local_id);
    req.replica_state.replica_epoch = broker_epoch as i64;
    req.max_wait_ms = config.max_wait_ms;
    req.min_bytes = 1;
    req.max_bytes = config.response_max_bytes;
    req.isolation_level = 0;
    if full {
        session.build(&mut req, wanted);
    } else {
        session.build_changes(&mut req, wanted);
    }
    req
}

/// Why a partition's fetch result was not applied.
#[derive(Debug, thiserror::Error)]
enum ApplyError {
    #[error("leader answered {0:?}")]
    Leader(ResponseError),
    #[error(transparent)]
    Local(#[from] crate::error::ApiError),
}

async fn apply(
    part: &Arc<Partition>,
    epoch: i32,
    pd: kafka_protocol::messages::fetch_response::PartitionData,
    remote: Option<&Arc<crate::remote_log::RemoteLog>>,
) -> Result<(), ApplyError> {
    let now = crate::system::now_ms();
    if pd.error_code != 0 {
        let code = ResponseError::try_from_code(pd.error_code)
            .unwrap_or(ResponseError::UnknownServerError);
        if code == ResponseError::OffsetMovedToTieredStorage {
            // The leader's local log starts past ours ends (or we have an
            // empty disk): start from remote state, copy no remote data.
            let Some(remote) = remote else {
                return Err(ApplyError::Leader(code));
            };
            remote
                .restore_follower(part, epoch, pd.log_start_offset)
                .await?;
            return Ok(());
        }
        if code == ResponseError::OffsetOutOfRange {
            let (leo, _) = part.fetch_position();
            // Behind the leader's log start: start over where it starts.
            // Ahead of its log end (an unclean election): cut to its HW.
            let to = if leo < pd.log_start_offset {
                TruncateTo::FullyStartAt(pd.log_start_offset)
            } else {
                TruncateTo::Offset(pd.high_watermark.max(0))
            };
            warn!(topic = %part.topic, partition = part.index, leo, ?to, "fetch offset out of range on the leader");
            let p = part.clone();
            tokio::task::spawn_blocking(move || p.truncate_as_follower(epoch, to))
                .await
                .expect("truncate task")?;
            return Ok(());
        }
        return Err(ApplyError::Leader(code));
    }
    if pd.diverging_epoch.epoch >= 0 && pd.diverging_epoch.end_offset >= 0 {
        let to = part.truncation_offset(pd.diverging_epoch.epoch, pd.diverging_epoch.end_offset);
        info!(
            topic = %part.topic,
            partition = part.index,
            diverging_epoch = pd.diverging_epoch.epoch,
            leader_end_offset = pd.diverging_epoch.end_offset,
            truncate_to = to,
            "truncating divergent log tail"
        );
        let p = part.clone();
        tokio::task::spawn_blocking(move || p.truncate_as_follower(epoch, TruncateTo::Offset(to)))
            .await
            .expect("truncate task")?;
        return Ok(());
    }
    let records = pd.records.unwrap_or_default();
    let p = part.clone();
    tokio::task::spawn_blocking(move || {
        p.append_as_follower(epoch, &records, pd.high_watermark, pd.log_start_offset, now)
    })
    .await
    .expect("append task")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use skein_storage::{Log, LogConfig};

    fn part(dir: &std::path::Path, index: i32) -> Arc<Partition> {
        let log = Log::open(dir.join(format!("t-{index}")), LogConfig::default(), 0).unwrap();
        Arc::new(Partition::new("t", index, uuid::Uuid::nil(), 2, log))
    }

    /// A failed partition sits out its backoff while the others are
    /// fetched; a new leader epoch, or the end of the backoff, brings it
    /// back; with every partition sitting out, the fetcher sleeps until the
    /// first backoff ends.
    #[test]
    fn a_failed_partition_sits_out_alone_until_its_backoff_or_a_new_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (part(dir.path(), 0), part(dir.path(), 1));
        let now = Instant::now();
        let later = now + Duration::from_millis(500);
        let mut delayed = Delayed::default();
        delayed.delay(&a, 3, later);

        let mut assigned = vec![(a.clone(), 3), (b.clone(), 3)];
        assert_eq!(delayed.keep_ready(&mut assigned, now), None);
        let left: Vec<i32> = assigned.iter().map(|(p, _)| p.index).collect();
        assert_eq!(left, vec![1], "only the failed one sits out");

        let mut assigned = vec![(a.clone(), 4)];
        assert_eq!(delayed.keep_ready(&mut assigned, now), None);
        assert_eq!(assigned.len(), 1, "a new leader epoch fetches at once");

        let mut assigned = vec![(a.clone(), 3)];
        assert_eq!(delayed.keep_ready(&mut assigned, now), Some(later));
        assert!(
            assigned.is_empty(),
            "all sit out: sleep until the first ends"
        );

        let mut assigned = vec![(a, 3)];
        assert_eq!(delayed.keep_ready(&mut assigned, later), None);
        assert_eq!(assigned.len(), 1, "back after its backoff");
    }
}
