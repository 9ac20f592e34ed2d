//! A minimal Kafka admin client: just `DeleteTopics`, which the Topic
//! finalizer sends to a cluster's bootstrap address.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use kafka_protocol::messages::{
    ApiKey, DeleteTopicsRequest, DeleteTopicsResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `DeleteTopics` version sent (flexible, topic names; brokers serve 1..=6).
const DELETE_TOPICS_VERSION: i16 = 4;
/// Kafka's UNKNOWN_TOPIC_OR_PARTITION: the topic is already gone.
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
/// Largest response accepted (a DeleteTopics answer is tiny).
const MAX_RESPONSE: usize = 1 << 20;

/// A boxed future, for the object-safe [`TopicRemover`].
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Removes a topic's data from a running cluster (Kafka `DeleteTopics`
/// through the bootstrap address). A topic the cluster does not know counts
/// as removed.
pub trait TopicRemover: Send + Sync {
    fn delete_topic<'a>(
        &'a self,
        bootstrap: &'a str,
        topic: &'a str,
    ) -> BoxFuture<'a, Result<(), AdminError>>;
}

/// Why a `DeleteTopics` through a cluster's bootstrap address failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("no answer from {bootstrap} within {timeout:?}")]
    Timeout {
        bootstrap: String,
        timeout: Duration,
    },
    #[error("{action} {bootstrap}: {source}")]
    Io {
        action: &'static str,
        bootstrap: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Protocol(String),
    #[error("broker refused to delete {topic:?}: error code {code}{}", message.as_ref().map(|m| format!(" ({m})")).unwrap_or_default())]
    Refused {
        topic: String,
        code: i16,
        message: Option<String>,
    },
}

impl AdminError {
    fn io(action: &'static str, bootstrap: &str) -> impl FnOnce(std::io::Error) -> Self {
        let bootstrap = bootstrap.to_string();
        move |source| AdminError::Io {
            action,
            bootstrap,
            source,
        }
    }
}

/// Deletes topics with Kafka's `DeleteTopics` over a plain TCP connection.
#[derive(Clone, Debug)]
pub struct KafkaTopicRemover {
    /// Bound on connect + request + response.
    pub timeout: Duration,
}

impl Default for KafkaTopicRemover {
    fn default() -> Self {
        KafkaTopicRemover {
            timeout: Duration::from_secs(10),
        }
    }
}

impl TopicRemover for KafkaTopicRemover {
    fn delete_topic<'a>(
        &'a self,
        bootstrap: &'a str,
        topic: &'a str,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        Box::pin(async move {
            match tokio::time::timeout(self.timeout, delete_topic(bootstrap, topic, self.timeout))
                .await
            {
                Ok(r) => r,
                Err(_) => Err(AdminError::Timeout {
                    bootstrap: bootstrap.to_string(),
                    timeout: self.timeout,
                }),
            }
        })
    }
}

/// Encodes a size-prefixed `DeleteTopics` request.
pub fn encode_delete_topics(
    topic: &str,
    correlation_id: i32,
    timeout: Duration,
) -> Result<BytesMut, AdminError> {
    let v = DELETE_TOPICS_VERSION;
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::DeleteTopics as i16)
        .with_request_api_version(v)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("skein-operator")));
    let request = DeleteTopicsRequest::default()
        .with_topic_names(vec![TopicName(StrBytes::from_string(topic.to_string()))])
        .with_timeout_ms(i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, DeleteTopicsRequest::header_version(v))
        .map_err(|e| AdminError::Protocol(format!("encoding request header: {e}")))?;
    request
        .encode(&mut body, v)
        .map_err(|e| AdminError::Protocol(format!("encoding DeleteTopics: {e}")))?;
    let mut framed = BytesMut::with_capacity(body.len() + 4);
    framed.extend_from_slice(&(body.len() as i32).to_be_bytes());
    framed.extend_from_slice(&body);
    Ok(framed)
}

/// Decodes a `DeleteTopics` response body (without the size prefix) and
/// returns the outcome for `topic`.
pub fn decode_delete_topics(mut body: bytes::Bytes, topic: &str) -> Result<(), AdminError> {
    let v = DELETE_TOPICS_VERSION;
    ResponseHeader::decode(&mut body, DeleteTopicsResponse::header_version(v))
        .map_err(|e| AdminError::Protocol(format!("decoding response header: {e}")))?;
    let response = DeleteTopicsResponse::decode(&mut body, v)
        .map_err(|e| AdminError::Protocol(format!("decoding DeleteTopics: {e}")))?;
    let result = response
        .responses
        .iter()
        .find(|r| r.name.as_ref().map(|n| n.0.as_str()) == Some(topic))
        .ok_or_else(|| {
            AdminError::Protocol(format!("the broker did not answer for topic {topic:?}"))
        })?;
    match result.error_code {
        0 | UNKNOWN_TOPIC_OR_PARTITION => Ok(()),
        code => Err(AdminError::Refused {
            topic: topic.to_string(),
            code,
            message: result.error_message.as_ref().map(|m| m.to_string()),
        }),
    }
}

async fn delete_topic(bootstrap: &str, topic: &str, timeout: Duration) -> Result<(), AdminError> {
    let mut stream = TcpStream::connect(bootstrap)
        .await
        .map_err(AdminError::io("connecting to", bootstrap))?;
    let request = encode_delete_topics(topic, 1, timeout)?;
    stream
        .write_all(&request)
        .await
        .map_err(AdminError::io("sending to", bootstrap))?;
    let mut len = [0u8; 4];
    stream
        .read_exact(&mut len)
        .await
        .map_err(AdminError::io("reading from", bootstrap))?;
    let len = usize::try_from(i32::from_be_bytes(len))
        .map_err(|_| AdminError::Protocol("negative response size".into()))?;
    if len > MAX_RESPONSE {
        return Err(AdminError::Protocol(format!(
            "response of {len} bytes is too large"
        )));
    }
    let mut body = BytesMut::zeroed(len);
    stream
        .read_exact(&mut body)
        .await
        .map_err(AdminError::io("reading from", bootstrap))?;
    let body = body.freeze();
    debug_assert!(body.remaining() == len);
    decode_delete_topics(body, topic)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
    use tokio::net::TcpListener;

    /// A one-request broker: checks the DeleteTopics it gets and answers `error_code`.
    async fn fake_broker(error_code: i16) -> (String, tokio::task::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let task = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut len = [0u8; 4];
            s.read_exact(&mut len).await.unwrap();
            let mut buf = BytesMut::zeroed(i32::from_be_bytes(len) as usize);
            s.read_exact(&mut buf).await.unwrap();
            let mut buf = buf.freeze();
            let v = DELETE_TOPICS_VERSION;
            let header =
                RequestHeader::decode(&mut buf, DeleteTopicsRequest::header_version(v)).unwrap();
            assert_eq!(header.request_api_key, ApiKey::DeleteTopics as i16);
            let req = DeleteTopicsRequest::decode(&mut buf, v).unwrap();
            let name = req.topic_names[0].0.to_string();
            let resp = DeleteTopicsResponse::default().with_responses(vec![
                DeletableTopicResult::default()
                    .with_name(Some(TopicName(StrBytes::from_string(name.clone()))))
                    .with_error_code(error_code),
            ]);
            let mut body = BytesMut::new();
            ResponseHeader::default()
                .with_correlation_id(header.correlation_id)
                .encode(&mut body, DeleteTopicsResponse::header_version(v))
                .unwrap();
            resp.encode(&mut body, v).unwrap();
            s.write_all(&(body.len() as i32).to_be_bytes())
                .await
                .unwrap();
            s.write_all(&body).await.unwrap();
            name
        });
        (addr, task)
    }

    #[tokio::test]
    async fn deletes_a_topic() {
        let (addr, broker) = fake_broker(0).await;
        KafkaTopicRemover::default()
            .delete_topic(&addr, "orders")
            .await
            .unwrap();
        assert_eq!(broker.await.unwrap(), "orders");
    }

    #[tokio::test]
    async fn an_unknown_topic_counts_as_deleted() {
        let (addr, _broker) = fake_broker(UNKNOWN_TOPIC_OR_PARTITION).await;
        KafkaTopicRemover::default()
            .delete_topic(&addr, "gone")
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_refusal_is_an_error() {
        // 41 = NOT_CONTROLLER
        let (addr, _broker) = fake_broker(41).await;
        let err = KafkaTopicRemover::default()
            .delete_topic(&addr, "orders")
            .await
            .unwrap_err();
        assert!(matches!(err, AdminError::Refused { code: 41, .. }), "{err}");
        assert!(err.to_string().contains("error code 41"), "{err}");
    }

    #[tokio::test]
    async fn an_unreachable_cluster_is_an_error() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        drop(listener);
        let err = KafkaTopicRemover::default()
            .delete_topic(&addr, "orders")
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                AdminError::Io {
                    action: "connecting to",
                    ..
                }
            ),
            "{err}"
        );
    }
}
