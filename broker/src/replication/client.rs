//! A minimal Kafka client for broker-to-broker requests (a follower's
//! fetches): one connection, one request in flight, over the inter-broker
//! listener's security protocol.

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::inter_broker::{InterBrokerSecurity, SaslLogin};
use crate::listeners::SaslMechanism;
use crate::sasl::scram_client::ScramClient;

/// Why a request to another broker failed; the caller reconnects.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("authentication failed: {0}")]
    Auth(String),
}

/// What a connection runs over: TCP, or TLS on TCP.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A connection to another broker.
pub struct BrokerClient {
    stream: Box<dyn Io>,
    correlation: i32,
    client_id: StrBytes,
}

impl BrokerClient {
    /// Connects to `addr` (`host:port` of the other broker's inter-broker
    /// listener) and authenticates as `security` says.
    pub async fn connect(
        addr: &str,
        client_id: String,
        security: &InterBrokerSecurity,
    ) -> Result<Self, ClientError> {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let stream: Box<dyn Io> = match &security.tls {
            None => Box::new(tcp),
            Some(config) => {
                let (host, _) = crate::listeners::split_host_port(addr)
                    .ok_or_else(|| ClientError::Protocol(format!("'{addr}' is not host:port")))?;
                let name = ServerName::try_from(host.clone()).map_err(|e| {
                    ClientError::Protocol(format!("'{host}' as a TLS server name: {e}"))
                })?;
                let tls = tokio_rustls::TlsConnector::from(config.get())
                    .connect(name, tcp)
                    .await?;
                Box::new(tls)
            }
        };
        let mut client = Self {
            stream,
            correlation: 0,
            client_id: StrBytes::from_string(client_id),
        };
        if let Some(login) = &security.sasl {
            client.authenticate(login).await?;
        }
        Ok(client)
    }

    /// SaslHandshake, then SaslAuthenticate rounds (KIP-152).
    async fn authenticate(&mut self, login: &SaslLogin) -> Result<(), ClientError> {
        let refused = |what: &str, code: i16, msg: Option<StrBytes>| {
            ClientError::Auth(format!(
                "{what} refused ({}): {}",
                code,
                msg.map(|m| m.to_string()).unwrap_or_default()
            ))
        };
        let mut hs = SaslHandshakeRequest::default();
        hs.mechanism = StrBytes::from_static_str(login.mechanism.name());
        let r = self.call(&hs, 1).await?;
        if r.error_code != 0 {
            return Err(refused("SaslHandshake", r.error_code, None));
        }
        let round = |bytes: Vec<u8>| {
            let mut a = SaslAuthenticateRequest::default();
            a.auth_bytes = bytes.into();
            a
        };
        match login.mechanism {
            SaslMechanism::Plain => {
                let token = format!("\0{}\0{}", login.username, login.password).into_bytes();
                let r = self.call(&round(token), 2).await?;
                if r.error_code != 0 {
                    return Err(refused("PLAIN", r.error_code, r.error_message));
                }
            }
            SaslMechanism::OAuthBearer => {
                return Err(ClientError::Auth(
                    "OAUTHBEARER is not used for replication".into(),
                ))
            }
            SaslMechanism::Scram(m) => {
                let auth = |e: crate::sasl::scram::ScramError| ClientError::Auth(e.0);
                let mut scram =
                    ScramClient::new(m, &login.username, &login.password).map_err(auth)?;
                let r = self.call(&round(scram.first()), 2).await?;
                if r.error_code != 0 {
                    return Err(refused(m.name(), r.error_code, r.error_message));
                }
                let last = scram.respond(&r.auth_bytes).map_err(auth)?;
                let r = self.call(&round(last), 2).await?;
                if r.error_code != 0 {
                    return Err(refused(m.name(), r.error_code, r.error_message));
                }
                scram.verify(&r.auth_bytes).map_err(auth)?;
            }
        }
        Ok(())
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
        // Over TLS the last record may wait in the session until flushed.
        self.stream.flush().await?;
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
