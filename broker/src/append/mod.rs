//! The one way anything appends to a partition this broker leads (Kafka's
//! `ReplicaManager.appendRecords`): a client's Produce, the group and
//! transaction coordinators' records, and transaction markers all call
//! [`ReplicaManager::append_records`]. Replication is the follower fetcher's
//! business (`Partition::append_as_follower`), not this path's.
//!
//! The append itself is synchronous: the records are in the leader's log
//! (or refused) when it returns, so a coordinator can append under its own
//! lock. What it returns, [`Appended`], is a future that resolves once the
//! write counts for the acks it asked for — at once for acks 0 and 1, when
//! the high watermark passes it for acks=all (Kafka's produce purgatory).
//!
//! What an append must pass depends on who writes it, as Kafka's
//! `AppendOrigin`: a client's batch is validated in full by the log, may be
//! re-encoded to the topic's `compression.type`, and is held back behind an
//! idempotent producer's refused batch (`refused_batches`); a coordinator's
//! records and markers are trusted, control batches included.

pub mod refused_batches;

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use skein_storage::batch::BatchHeader;
use skein_storage::{AppendInfo, AppendOrigin};

use crate::error::ApiError;
use crate::partition::Partition;
use crate::replica_manager::{not_hosted, ReplicaManager};
use crate::system::now_ms;
use refused_batches::{RefusedBatches, Verdict};

/// How many replicas must have an append before it counts (Produce's
/// `acks`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequiredAcks {
    /// acks=0: the client does not even read the answer.
    None,
    /// acks=1: in the leader's log.
    Leader,
    /// acks=-1: in the log of every ISR member; refused up front when the
    /// ISR is smaller than `min.insync.replicas`.
    All,
}

impl RequiredAcks {
    /// Produce's `acks` field; `None` for a value Kafka refuses
    /// (INVALID_REQUIRED_ACKS).
    pub fn from_produce(acks: i16) -> Option<Self> {
        match acks {
            0 => Some(Self::None),
            1 => Some(Self::Leader),
            -1 => Some(Self::All),
            _ => None,
        }
    }
}

/// The records of one partition of a Produce request, their batch headers
/// walked once when the request is read: every later step (the zstd and
/// transactional checks, KIP-890 verification, the refused-batch check)
/// reads what was parsed here.
#[derive(Debug, Clone)]
pub struct ClientRecords {
    bytes: Option<Bytes>,
    /// The first batch's header, if it parses (a malformed one is the log's
    /// to refuse, with the error it names).
    first: Option<BatchHeader>,
    /// Whether any batch has the transactional bit.
    transactional: bool,
}

impl ClientRecords {
    pub fn parse(bytes: Option<Bytes>) -> Self {
        let mut first = None;
        let mut transactional = false;
        if let Some(b) = &bytes {
            for (h, _) in skein_storage::batch::iter_batches(b).map_while(Result::ok) {
                transactional |= h.is_transactional();
                first.get_or_insert(h);
            }
        }
        Self {
            bytes,
            first,
            transactional,
        }
    }

    /// The first batch's header.
    pub fn header(&self) -> Option<&BatchHeader> {
        self.first.as_ref()
    }

    /// Whether a batch is transactional (a control batch from a client is too).
    pub fn is_transactional(&self) -> bool {
        self.transactional
    }

    /// The request's bytes for this partition.
    pub fn len(&self) -> usize {
        self.bytes.as_ref().map_or(0, Bytes::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What to append, and to where.
pub enum Records {
    /// A client's Produce records, as received.
    Client(ClientRecords),
    /// Batches the broker built itself (coordinator records, markers).
    Built(BytesMut),
}

/// One append: the partition, the records, who writes them, and how long
/// an acks=all append waits for the ISR.
pub struct AppendRecords<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub records: Records,
    pub origin: AppendOrigin,
    pub acks: RequiredAcks,
    pub timeout: Duration,
}

/// An append in the leader's log. Awaiting it waits until it counts for
/// the acks asked for; the offsets are known at once.
pub struct Appended {
    /// Where the records went. `duplicate` is set when an idempotent
    /// producer's retry was already in the log (its original offsets).
    pub info: AppendInfo,
    /// The leader epoch the records were written in.
    pub leader_epoch: i32,
    wait: Option<Wait>,
}

/// What an acks=all append waits for.
struct Wait {
    partition: Arc<Partition>,
    deadline: tokio::time::Instant,
    /// An idempotent producer's batch: a failed wait is a refusal its
    /// pipelined batches must share.
    refusal: Option<(Arc<RefusedBatches>, BatchHeader)>,
}

impl Appended {
    /// The offset the high watermark must reach for the write to count
    /// (one past its last record).
    pub fn required_offset(&self) -> i64 {
        self.info.last_offset + 1
    }
}

impl IntoFuture for Appended {
    type Output = Result<AppendInfo, ApiError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        let required = self.required_offset();
        let Appended {
            info,
            leader_epoch,
            wait,
        } = self;
        Box::pin(async move {
            let Some(w) = wait else {
                return Ok(info);
            };
            let replicated =
                wait_replicated(&w.partition, required, leader_epoch, w.deadline).await;
            if let (Err(e), Some((refusals, h))) = (&replicated, &w.refusal) {
                let key = (w.partition.topic.clone(), w.partition.index, h.producer_id);
                refusals.record(key, h, e.code, Instant::now());
            }
            replicated.map(|()| info)
        })
    }
}

impl ReplicaManager {
    /// Appends `req.records` to the partition as its leader. Fails at once
    /// (nothing written) when this broker does not lead the partition, when
    /// acks=all and the ISR is below `min.insync.replicas`, or when the log
    /// refuses the records; otherwise returns the append to await.
    pub fn append_records(&self, req: AppendRecords<'_>) -> Result<Appended, ApiError> {
        let deadline = tokio::time::Instant::now() + req.timeout;
        let acks_all = req.acks == RequiredAcks::All;
        let (written, refusal) = match req.records {
            Records::Built(mut batch) => {
                let part = self.get_or_err(req.topic, req.partition)?;
                let written = append_bytes(part, &mut batch, acks_all, req.origin)?;
                (written, None)
            }
            Records::Client(records) => {
                let (written, idem) =
                    self.append_client(req.topic, req.partition, records, acks_all, req.origin)?;
                (written, idem.map(|h| (self.refused_batches.clone(), h)))
            }
        };
        let (info, partition, leader_epoch) = written;
        Ok(Appended {
            info,
            leader_epoch,
            wait: acks_all.then_some(Wait {
                partition,
                deadline,
                refusal,
            }),
        })
    }

    /// A client's records: one batch per partition, held back behind a
    /// refused batch of the same idempotent producer, re-encoded to the
    /// topic's codec, then validated in full by the log. Returns the header
    /// of an idempotent producer's batch with the append.
    fn append_client(
        &self,
        topic: &str,
        partition: i32,
        records: ClientRecords,
        acks_all: bool,
        origin: AppendOrigin,
    ) -> Result<(Written, Option<BatchHeader>), ApiError> {
        let ClientRecords { bytes, first, .. } = records;
        let bytes =
            bytes.ok_or_else(|| ApiError::new(ResponseError::InvalidRecord, "no records"))?;
        if bytes.is_empty() {
            return Err(ApiError::new(
                ResponseError::InvalidRecord,
                "empty record set",
            ));
        }
        // Produce v3+ carries exactly one batch per partition (Kafka enforces
        // the same); it is what makes a retried batch recognisable as a
        // duplicate.
        if first.as_ref().is_some_and(|h| h.total_size() < bytes.len()) {
            return Err(ApiError::new(
                ResponseError::InvalidRecord,
                "produce requests must carry exactly one record batch per partition",
            ));
        }
        let idem = first
            .filter(|h| h.producer_id >= 0 && !h.is_control())
            .map(|h| ((topic.to_string(), partition, h.producer_id), h));
        let part = self.get(topic, partition);
        if let (Some((key, h)), Some(part)) = (&idem, &part) {
            // Keep an idempotent producer's pipeline in order when an earlier
            // batch of it was refused (see `refused_batches`).
            let verdict = part.with_producer(h.producer_id, |state| {
                self.refused_batches.check(key, h, state, Instant::now())
            });
            if let Verdict::Refuse(code) = verdict {
                tracing::debug!(
                    topic,
                    partition,
                    producer_id = h.producer_id,
                    sequence = h.base_sequence,
                    "refusing a batch behind a refused one of the same producer"
                );
                return Err(ApiError::new(
                    code,
                    format!(
                        "an earlier batch of producer {} was refused and is not written; \
                         it must be resent before sequence {}",
                        h.producer_id, h.base_sequence
                    ),
                ));
            }
        }
        let written = part
            .ok_or_else(|| not_hosted(topic, partition))
            .and_then(|part| append_received(part, &bytes, acks_all, origin));
        let Some((key, h)) = idem else {
            return Ok((written?, None));
        };
        match &written {
            Ok(_) => self.refused_batches.clear(&key, &h),
            Err(e) => self.refused_batches.record(key, &h, e.code, Instant::now()),
        }
        Ok((written?, Some(h)))
    }
}

/// The offsets are written into the batch headers, so a client's batches
/// need a private mutable copy; everything else stays byte-for-byte as sent,
/// unless the topic's `compression.type` names another codec: then they are
/// re-encoded here, before the partition's locks are taken.
fn append_received(
    part: Arc<Partition>,
    bytes: &Bytes,
    acks_all: bool,
    origin: AppendOrigin,
) -> Result<Written, ApiError> {
    let recompressed = match part.compression_target() {
        Some(codec) => skein_storage::recompress::recompress(bytes, codec)?,
        None => None,
    };
    let mut buf = BytesMut::from(recompressed.as_deref().unwrap_or(&bytes[..]));
    append_bytes(part, &mut buf, acks_all, origin)
}

fn append_bytes(
    part: Arc<Partition>,
    batch: &mut [u8],
    acks_all: bool,
    origin: AppendOrigin,
) -> Result<Written, ApiError> {
    let epoch = part.leader_epoch();
    let info = part.append_as_leader(batch, acks_all, now_ms(), origin)?;
    Ok((info, part, epoch))
}

/// What the leader's log took, the partition, and the leader epoch it was
/// written in.
type Written = (AppendInfo, Arc<Partition>, i32);

/// Waits until the high watermark of `part` reaches `required` (the ISR has
/// the records), the partition fails the write (leadership lost, the ISR
/// below `min.insync.replicas`), or `deadline` passes.
async fn wait_replicated(
    part: &Partition,
    required: i64,
    leader_epoch: i32,
    deadline: tokio::time::Instant,
) -> Result<(), ApiError> {
    loop {
        let changed = part.changed();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if part.check_replicated(required, leader_epoch)? {
            return Ok(());
        }
        if tokio::time::timeout_at(deadline, changed).await.is_err() {
            return Err(ApiError::new(
                ResponseError::RequestTimedOut,
                format!(
                    "{}-{}: the ISR did not acknowledge the records within the request timeout",
                    part.topic, part.index
                ),
            ));
        }
    }
}
