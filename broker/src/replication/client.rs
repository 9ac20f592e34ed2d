//! A minimal Kafka client for broker-to-broker requests (a follower's
//! fetches): one connection, one request in flight.

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Why a request to another broker failed; the caller reconnects.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("protocol error: {0}")]
    Protocol(String),
}

/// A connection to another broker.
pub struct BrokerClient {
    stream: TcpStream,
    correlation: i32,
    client_id: StrBytes,
}

impl BrokerClient {
    pub async fn connect(addr: &str, client_id: String) -> Result<Self, ClientError> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            correlation: 0,
            client_id: StrBytes::from_string(client_id),
        })
    }

    /// Sends `req` at `version` and decodes the response.
    pub async fn call<Req: Request>(
        &mut self,
        req: &Req,
        version: i16,
    ) -> Result<Req::Response, ClientError> {
        self.correlation = self.correlation.wrapping_add(1);
        let mut header = RequestHeader::default();
        header.request_api_key = Req::KEY;
        header.request_api_version = version;
        header.correlation_id = self.correlation;
        header.client_id = Some(self.client_id.clone());
        let mut buf = BytesMut::with_capacity(256);
        buf.put_i32(0);
        header
            .encode(&mut buf, Req::header_version(version))
            .map_err(|e| ClientError::Protocol(e.to_string()))?;
        req.encode(&mut buf, version)
            .map_err(|e| ClientError::Protocol(e.to_string()))?;
        let len = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&len.to_be_bytes());
        self.stream.write_all(&buf).await?;
        let n = self.stream.read_i32().await?;
        if n < 4 {
            return Err(ClientError::Protocol(format!(
                "response frame of {n} bytes"
            )));
        }
        let mut body = BytesMut::zeroed(n as usize);
        self.stream.read_exact(&mut body).await?;
        let mut body = body.freeze();
        let h = ResponseHeader::decode(&mut body, Req::Response::header_version(version))
            .map_err(|e| ClientError::Protocol(e.to_string()))?;
        if h.correlation_id != self.correlation {
            return Err(ClientError::Protocol(format!(
                "correlation id {} answered {}",
                h.correlation_id, self.correlation
            )));
        }
        Req::Response::decode(&mut body, version).map_err(|e| ClientError::Protocol(e.to_string()))
    }
}
