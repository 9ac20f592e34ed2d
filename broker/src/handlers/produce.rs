//! Produce: appends record batches as received (offsets assigned in place,
//! CRC checked, never re-encoded) and answers per partition. With acks=all
//! the answer waits until the ISR has the records (the high watermark passed
//! them) or the request's `timeout_ms` ends (Kafka's produce purgatory).

use std::sync::Arc;

use bytes::BytesMut;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};

use super::strb;
use crate::broker::{now_ms, Broker};
use crate::error::ApiError;
use crate::partition::Partition;

pub async fn handle(
    broker: &Arc<Broker>,
    req: ProduceRequest,
    version: i16,
) -> Option<ProduceResponse> {
    let acks = req.acks;
    let deadline = tokio::time::Instant::now()
        + std::time::Duration::from_millis(req.timeout_ms.max(0) as u64);
    let mut resp = ProduceResponse::default();
    // acks=all appends, waited for once every partition is written.
    let mut pending: Vec<(usize, usize, Arc<Partition>, i64, i32)> = Vec::new();
    for td in req.topic_data {
        // v13+ names topics by id; older versions by name.
        let topic = if td.name.0.is_empty() {
            broker.metadata.topic_by_id(td.topic_id)
        } else {
            broker.metadata.topic(&td.name.0).or_else(|| {
                if broker.config.auto_create_topics_enable {
                    broker.auto_create(&td.name.0).ok()
                } else {
                    None
                }
            })
        };
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
                    Some(t) => append(broker, &t.name, pd.index, pd.records, acks == -1),
                }
            };
            match result {
                Ok((info, part, epoch)) => {
                    if acks == -1 && !info.duplicate {
                        pending.push((
                            resp.responses.len(),
                            tr.partition_responses.len(),
                            part,
                            info.last_offset + 1,
                            epoch,
                        ));
                    }
                    pr.base_offset = info.first_offset;
                    pr.log_append_time_ms = info.log_append_time;
                    pr.log_start_offset = info.log_start_offset;
                }
                Err(e) => {
                    tracing::debug!(topic = %td.name.0, partition = pd.index, error = %e, "produce rejected");
                    pr.error_code = e.code();
                    pr.error_message = e.message();
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
    for (t, p, part, required, epoch) in pending {
        if let Err(e) = wait_replicated(&part, required, epoch, deadline).await {
            let pr = &mut resp.responses[t].partition_responses[p];
            pr.error_code = e.code();
            pr.error_message = e.message();
        }
    }
    if acks == 0 {
        None
    } else {
        Some(resp)
    }
}

/// Waits until the high watermark reaches `required` (the ISR has the
/// records), the partition fails the request, or `deadline` passes.
pub(crate) async fn wait_replicated(
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

type Appended = (skein_storage::AppendInfo, Arc<Partition>, i32);

fn append(
    broker: &Broker,
    topic: &str,
    partition: i32,
    records: Option<bytes::Bytes>,
    acks_all: bool,
) -> Result<Appended, ApiError> {
    let part = broker.replicas.get_or_err(topic, partition)?;
    let epoch = part.leader_epoch();
    let records =
        records.ok_or_else(|| ApiError::new(ResponseError::InvalidRecord, "no records"))?;
    if records.is_empty() {
        return Err(ApiError::new(
            ResponseError::InvalidRecord,
            "empty record set",
        ));
    }
    // Produce v3+ carries exactly one batch per partition (Kafka enforces the
    // same); it is what makes a retried batch recognisable as a duplicate.
    if let Ok(h) = skein_storage::batch::BatchHeader::parse(&records) {
        if h.total_size() < records.len() {
            return Err(ApiError::new(
                ResponseError::InvalidRecord,
                "produce requests must carry exactly one record batch per partition",
            ));
        }
    }
    // The offsets are written into the batch headers, so the batches need a
    // private mutable copy; everything else stays byte-for-byte as sent.
    let mut buf = BytesMut::from(&records[..]);
    let info = part.append_as_leader(&mut buf, acks_all, now_ms())?;
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
        .inc_by(buf.len() as u64);
    broker
        .metrics
        .records_in
        .with_label_values(&[topic])
        .inc_by(info.num_records);
    Ok((info, part, epoch))
}
