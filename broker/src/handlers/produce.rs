//! Produce: appends record batches as received (offsets assigned in place,
//! CRC checked, never re-encoded) and answers per partition. With acks=all
//! the answer waits until the ISR has the records (the high watermark passed
//! them) or the request's `timeout_ms` ends (Kafka's produce purgatory).
//! Batches an idempotent producer pipelined behind one this broker refused
//! are refused the same way (`refused_batches` says why).

use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use skein_storage::batch::BatchHeader;
use skein_storage::AppendOrigin;

use skein_controller::acls::AclOperation;

use super::refused_batches::Verdict;
use super::strb;
use crate::authorizer::{may_create, topic_denied, Authz};
use crate::broker::Broker;
use crate::error::ApiError;
use crate::partition::Partition;
use crate::system::now_ms;

/// The response, also for acks=0 (not sent then: the connection layer
/// counts its errors and closes the connection when there is one, as Kafka
/// does so the client notices and refreshes its metadata).
pub async fn handle(broker: &Arc<Broker>, req: ProduceRequest, version: i16) -> ProduceResponse {
    let acks = req.acks;
    let deadline = tokio::time::Instant::now()
        + std::time::Duration::from_millis(req.timeout_ms.max(0) as u64);
    let mut resp = ProduceResponse::default();
    // acks=all appends, waited for once every partition is written.
    let mut pending: Vec<Pending> = Vec::new();
    let authz = Authz::current(broker);
    // Transactional batches (control batches among them) need a
    // transactional id that the principal may Write; without one they would
    // open a transaction that no coordinator knows, holding the last stable
    // offset for good. As Kafka, every partition of such a request is refused.
    let transactional = req.topic_data.iter().any(|t| {
        t.partition_data
            .iter()
            .any(|p| p.records.as_deref().is_some_and(has_transactional_batch))
    });
    let txn_denied = match &req.transactional_id {
        Some(t) => !authz.allowed(
            AclOperation::Write,
            skein_controller::acls::ResourceType::TransactionalId,
            &t.0,
        ),
        None => transactional,
    };
    let req_tid = req.transactional_id.as_ref().map(|t| t.0.to_string());
    for td in req.topic_data {
        // Authorization comes before existence (Write on the topic): a
        // topic one may not write to is not revealed to exist.
        let denied_by_name = !td.name.0.is_empty() && !authz.topic(AclOperation::Write, &td.name.0);
        // v13+ names topics by id; older versions by name.
        let topic = if td.name.0.is_empty() {
            broker.metadata.topic_by_id(td.topic_id)
        } else if denied_by_name {
            None
        } else {
            broker.metadata.topic(&td.name.0).or_else(|| {
                if broker.config.auto_create_topics_enable && may_create(&authz, &td.name.0) {
                    broker.auto_create(&td.name.0).ok()
                } else {
                    None
                }
            })
        };
        let denied = denied_by_name
            || topic
                .as_ref()
                .is_some_and(|t| !authz.topic(AclOperation::Write, &t.name));
        let mut tr = TopicProduceResponse::default();
        tr.name = td.name.clone();
        tr.topic_id = td.topic_id;
        for pd in td.partition_data {
            let mut pr = PartitionProduceResponse::default();
            pr.index = pd.index;
            pr.base_offset = -1;
            pr.log_append_time_ms = -1;
            pr.log_start_offset = -1;
            let result = if !(acks == -1 || acks == 0 || acks == 1) {
                Err(ApiError::new(
                    ResponseError::InvalidRequiredAcks,
                    format!("acks must be -1, 0 or 1, got {acks}"),
                ))
            } else if txn_denied {
                Err(ApiError::new(
                    ResponseError::TransactionalIdAuthorizationFailed,
                    "Transactional Id authorization failed.",
                ))
            } else if denied {
                Err(topic_denied())
            } else {
                match &topic {
                    None if td.name.0.is_empty() => Err(ApiError::new(
                        ResponseError::UnknownTopicId,
                        "unknown topic id",
                    )),
                    None => Err(ApiError::new(
                        ResponseError::UnknownTopicOrPartition,
                        format!("topic '{}' does not exist", td.name.0),
                    )),
                    Some(t) if crate::internal_topics::is_internal(&t.name) => {
                        Err(crate::internal_topics::refused_write(&t.name, "append to"))
                    }
                    Some(t) => match check_request_records(version, &pd.records) {
                        Err(e) => Err(e),
                        Ok(()) => match verify_transaction(
                            broker,
                            &req_tid,
                            &t.name,
                            pd.index,
                            &pd.records,
                        )
                        .await
                        {
                            Ok(origin) => {
                                append(broker, &t.name, pd.index, pd.records, acks == -1, origin)
                            }
                            Err(e) => Err(e),
                        },
                    },
                }
            };
            match result {
                Ok((info, part, epoch, idem)) => {
                    if acks == -1 && !info.duplicate {
                        pending.push(Pending {
                            topic: resp.responses.len(),
                            partition: tr.partition_responses.len(),
                            part,
                            required: info.last_offset + 1,
                            leader_epoch: epoch,
                            idem,
                        });
                    }
                    pr.base_offset = info.first_offset;
                    pr.log_append_time_ms = info.log_append_time;
                    pr.log_start_offset = info.log_start_offset;
                }
                Err(e) => {
                    tracing::debug!(topic = %td.name.0, partition = pd.index, error = %e, "produce rejected");
                    pr.error_code = e.code();
                    pr.error_message = e.message();
                    pr.record_errors = e
                        .record_errors
                        .iter()
                        .map(|r| {
                            let mut b = BatchIndexAndErrorMessage::default();
                            b.batch_index = r.batch_index;
                            b.batch_index_error_message = Some(strb(r.message.clone()));
                            b
                        })
                        .collect();
                }
            }
            tr.partition_responses.push(pr);
        }
        if tr.name.0.is_empty() {
            if let Some(t) = &topic {
                if version < 13 {
                    tr.name = TopicName(strb(t.name.clone()));
                }
            }
        }
        resp.responses.push(tr);
    }
    let _parked = (!pending.is_empty()).then(|| broker.metrics.park("produce"));
    for p in pending {
        if let Err(e) =
            crate::replica_manager::wait_replicated(&p.part, p.required, p.leader_epoch, deadline)
                .await
        {
            if let Some(h) = &p.idem {
                let key = (p.part.topic.clone(), p.part.index, h.producer_id);
                broker
                    .refused_batches
                    .record(key, h, e.code, Instant::now());
            }
            let pr = &mut resp.responses[p.topic].partition_responses[p.partition];
            pr.error_code = e.code();
            pr.error_message = e.message();
        }
    }
    resp
}

/// What Kafka's `ProduceRequest.validateRecords` checks before anything
/// else: zstd needs Produce v7+ (`UNSUPPORTED_COMPRESSION_TYPE`); the
/// single batch and its magic are checked by the append.
fn check_request_records(version: i16, records: &Option<bytes::Bytes>) -> Result<(), ApiError> {
    let zstd = records
        .as_deref()
        .and_then(|r| BatchHeader::parse(r).ok())
        .is_some_and(|h| h.compression() == 4);
    if zstd && version < 7 {
        return Err(ApiError::new(
            ResponseError::UnsupportedCompressionType,
            format!("Produce requests with version {version} are not allowed to use ZStandard compression"),
        ));
    }
    Ok(())
}

/// KIP-890: a transactional batch goes in only if the coordinator of the
/// request's transactional id has the partition in that producer's ongoing
/// transaction (see `txn::verification`); the answer is how to append it.
async fn verify_transaction(
    broker: &Arc<Broker>,
    tid: &Option<String>,
    topic: &str,
    partition: i32,
    records: &Option<bytes::Bytes>,
) -> Result<AppendOrigin, ApiError> {
    let (Some(tid), Some(records)) = (tid, records) else {
        return Ok(AppendOrigin::Client);
    };
    match BatchHeader::parse(records) {
        Ok(h) if h.is_transactional() && !h.is_control() => {
            crate::txn::verification::verify(
                broker,
                tid,
                topic,
                partition,
                h.producer_id,
                h.producer_epoch,
            )
            .await
        }
        // Control batches and malformed ones are the validator's to refuse.
        _ => Ok(AppendOrigin::Client),
    }
}

/// Whether any batch in `records` has the transactional bit (a control
/// batch from a client has it too). Walks the headers only; a malformed
/// buffer is left to the append's validation.
fn has_transactional_batch(records: &[u8]) -> bool {
    skein_storage::batch::iter_batches(records)
        .map_while(Result::ok)
        .any(|(h, _)| h.is_transactional())
}

/// The first partition error of a produce response (for acks=0, why the
/// connection is closed).
pub fn first_error(resp: &ProduceResponse) -> Option<String> {
    resp.responses.iter().find_map(|t| {
        t.partition_responses
            .iter()
            .find(|p| p.error_code != 0)
            .map(|p| {
                let code = ResponseError::try_from_code(p.error_code)
                    .map_or_else(|| p.error_code.to_string(), |e| format!("{e:?}"));
                format!("{}-{}: {code}", t.name.0, p.index)
            })
    })
}

/// An acks=all append waiting for the ISR: where its answer goes, the
/// partition, the offset the high watermark must reach, the leader epoch it
/// was written in, and the batch header when an idempotent producer sent it.
struct Pending {
    topic: usize,
    partition: usize,
    part: Arc<Partition>,
    required: i64,
    leader_epoch: i32,
    idem: Option<BatchHeader>,
}

/// The append's result, the partition, the leader epoch it was written in,
/// and the header of an idempotent producer's batch.
type Appended = (
    skein_storage::AppendInfo,
    Arc<Partition>,
    i32,
    Option<BatchHeader>,
);

fn append(
    broker: &Broker,
    topic: &str,
    partition: i32,
    records: Option<bytes::Bytes>,
    acks_all: bool,
    origin: AppendOrigin,
) -> Result<Appended, ApiError> {
    let records =
        records.ok_or_else(|| ApiError::new(ResponseError::InvalidRecord, "no records"))?;
    if records.is_empty() {
        return Err(ApiError::new(
            ResponseError::InvalidRecord,
            "empty record set",
        ));
    }
    let header = BatchHeader::parse(&records).ok();
    // Produce v3+ carries exactly one batch per partition (Kafka enforces the
    // same); it is what makes a retried batch recognisable as a duplicate.
    if let Some(h) = &header {
        if h.total_size() < records.len() {
            return Err(ApiError::new(
                ResponseError::InvalidRecord,
                "produce requests must carry exactly one record batch per partition",
            ));
        }
    }
    let idem = header.filter(|h| h.producer_id >= 0 && !h.is_control());
    let Some(h) = idem else {
        return append_batch(broker, topic, partition, records, acks_all, origin)
            .map(|(info, part, epoch)| (info, part, epoch, None));
    };
    // An idempotent producer's batch: keep its pipeline in order when an
    // earlier batch of it was refused (see `refused_batches`).
    let key = (topic.to_string(), partition, h.producer_id);
    let refusals = &broker.refused_batches;
    let verdict = match broker.replicas.get(topic, partition) {
        Some(part) => part.with_log(|log| {
            refusals.check(
                &key,
                &h,
                log.producer_state().producers().get(&h.producer_id),
                Instant::now(),
            )
        }),
        None => Verdict::Proceed,
    };
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
    match append_batch(broker, topic, partition, records, acks_all, origin) {
        Ok((info, part, epoch)) => {
            refusals.clear(&key, &h);
            Ok((info, part, epoch, Some(h)))
        }
        Err(e) => {
            refusals.record(key, &h, e.code, Instant::now());
            Err(e)
        }
    }
}

/// A storage error (a full disk, an I/O error) is the operator's business,
/// not only the client's: it is logged, once per partition every 10 s.
pub(crate) fn log_storage_error(broker: &Broker, topic: &str, partition: i32, e: &ApiError) {
    if e.code != ResponseError::KafkaStorageError {
        return;
    }
    if let Some(left_out) = broker
        .warn_throttle
        .allow(&format!("storage {topic} {partition}"))
    {
        tracing::error!(topic, partition, error = %e.message, left_out, "cannot write to the log");
    }
}

fn append_batch(
    broker: &Broker,
    topic: &str,
    partition: i32,
    records: bytes::Bytes,
    acks_all: bool,
    origin: AppendOrigin,
) -> Result<(skein_storage::AppendInfo, Arc<Partition>, i32), ApiError> {
    let part = broker.replicas.get_or_err(topic, partition)?;
    let epoch = part.leader_epoch();
    // The offsets are written into the batch headers, so the batches need a
    // private mutable copy; everything else stays byte-for-byte as sent,
    // unless the topic's compression.type names another codec: then they
    // are re-encoded here, before the partition's locks are taken.
    let target = part.with_log(|l| l.config().compression_type);
    let recompressed = match target {
        Some(codec) => skein_storage::recompress::recompress(&records, codec)?,
        None => None,
    };
    let mut buf = BytesMut::from(recompressed.as_deref().unwrap_or(&records[..]));
    let info = part
        .append_as_leader(&mut buf, acks_all, now_ms(), origin)
        .inspect_err(|e| log_storage_error(broker, topic, partition, e))?;
    if info.duplicate {
        tracing::debug!(
            topic,
            partition,
            offset = info.first_offset,
            "duplicate batch from an idempotent producer"
        );
        // A retry of a batch already in the log is acknowledged like the
        // original: with acks=all only once it is replicated.
        let mut dup = info.clone();
        dup.duplicate = false;
        return Ok((dup, part, epoch));
    }
    broker
        .metrics
        .bytes_in
        .with_label_values(&[topic])
        .inc_by(records.len() as u64);
    broker
        .metrics
        .records_in
        .with_label_values(&[topic])
        .inc_by(info.num_records);
    Ok((info, part, epoch))
}
