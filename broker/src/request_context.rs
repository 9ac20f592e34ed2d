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
