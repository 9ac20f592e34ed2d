//! Mutual TLS on the control plane of a Kubernetes cluster (always on):
//! what the brokers are given. The certificates themselves are made and
//! renewed by [`crate::control_tls`]; the brokers re-read the mounted files
//! when they change.

use std::collections::BTreeMap;

/// Where the broker pods mount the Secret `<cluster>-control-tls`.
pub const MOUNT_DIR: &str = "/etc/skein/control-tls";
/// Keys of that Secret: the brokers' key and certificate, and the CA.
pub const KEYSTORE_KEY: &str = "broker-keystore.pem";
pub const CA_KEY: &str = "ca.crt";
/// The subject of the controller's certificate; brokers take sessions only
/// from it.
pub const CONTROLLER_SUBJECT: &str = "CN=skein-controller";

/// The broker settings that require the controller's certificate on the
/// control port and present the brokers' own.
pub fn broker_config() -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "control.ssl.keystore.location".to_string(),
            format!("{MOUNT_DIR}/{KEYSTORE_KEY}"),
        ),
        (
            "control.ssl.truststore.location".to_string(),
            format!("{MOUNT_DIR}/{CA_KEY}"),
        ),
        (
            "control.ssl.controller.subject".to_string(),
            CONTROLLER_SUBJECT.to_string(),
        ),
    ])
}
