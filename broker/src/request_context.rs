//! What a request handler knows about the connection its request came on:
//! the client's address, the listener, and the principal (task-locals set
//! by the server per connection and per request).

use crate::principal::Principal;

tokio::task_local! {
    /// The peer address of the connection whose request is being handled.
    pub static CLIENT_ADDR: std::net::SocketAddr;
    /// The name of the listener the connection arrived on.
    pub static LISTENER: std::sync::Arc<str>;
    /// Who the request being handled comes from.
    pub static PRINCIPAL: Principal;
    /// The connection's number, unique in this process (share sessions
    /// end with the connection that opened them).
    pub static CONNECTION_ID: u64;
}

/// The number of the connection whose request is being handled (0 outside
/// a connection).
pub fn connection_id() -> u64 {
    CONNECTION_ID.try_with(|c| *c).unwrap_or(0)
}

/// A number for a new connection.
pub fn next_connection_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The listener the request being handled arrived on (`None` outside a
/// connection, as in the fuzz harness).
pub fn listener_name() -> Option<std::sync::Arc<str>> {
    LISTENER.try_with(|l| l.clone()).ok()
}

/// The requesting client's host as Kafka shows it (`/1.2.3.4`).
pub fn client_host() -> String {
    CLIENT_ADDR
        .try_with(|a| format!("/{}", a.ip()))
        .unwrap_or_else(|_| "/unknown".into())
}
