//! GetTelemetrySubscriptions and PushTelemetry (KIP-714), answered by the
//! broker's `ClientMetrics`, and ListConfigResources (KIP-1142; v0 was
//! ListClientMetricsResources).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use skein_controller::acls::AclOperation;
use skein_controller::resource_configs::ConfigResourceKind;

use crate::authorizer::Authz;
use crate::broker::Broker;
use crate::client_metrics::Requester;

fn requester<'a>(header: &'a RequestHeader, session: &'a crate::sasl::Session) -> Requester<'a> {
    Requester {
        client_id: header.client_id.as_deref().unwrap_or(""),
        software: session.client_software(),
        peer: session.peer(),
    }
}

pub fn get_subscriptions(
    broker: &Arc<Broker>,
    header: &RequestHeader,
    session: &crate::sasl::Session,
    req: GetTelemetrySubscriptionsRequest,
) -> GetTelemetrySubscriptionsResponse {
    let configs = broker.metadata.image().resource_configs.clone();
    broker
        .client_metrics
        .get_subscriptions(&req, &requester(header, session), &configs)
}

pub fn push(
    broker: &Arc<Broker>,
    header: &RequestHeader,
    session: &crate::sasl::Session,
    req: PushTelemetryRequest,
) -> PushTelemetryResponse {
    let configs = broker.metadata.image().resource_configs.clone();
    broker
        .client_metrics
        .push(&req, &requester(header, session), &configs)
}

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const BROKER_LOGGER: i8 = 8;
const CLIENT_METRICS: i8 = 16;
const GROUP: i8 = 32;

/// The resource types a version lists: v0 client-metrics subscriptions
/// only, v1 every type Kafka 4.4 lists.
fn supported_types(version: i16) -> &'static [i8] {
    if version == 0 {
        &[CLIENT_METRICS]
    } else {
        &[TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP]
    }
}

/// ListConfigResources, as Kafka 4.4: DESCRIBE_CONFIGS on the cluster; no
/// types asked lists every supported one; a type this version does not
/// list is UNSUPPORTED_VERSION. Brokers (and broker loggers) are listed by
/// id, topics by name, subscriptions and groups with configs by name.
pub fn list_config_resources(
    broker: &Arc<Broker>,
    req: ListConfigResourcesRequest,
    version: i16,
) -> ListConfigResourcesResponse {
    let mut resp = ListConfigResourcesResponse::default();
    if !Authz::current(broker).cluster(AclOperation::DescribeConfigs) {
        resp.error_code = ResponseError::ClusterAuthorizationFailed.code();
        return resp;
    }
    let supported = supported_types(version);
    let types: Vec<i8> = if req.resource_types.is_empty() {
        supported.to_vec()
    } else {
        req.resource_types.clone()
    };
    if types.iter().any(|t| !supported.contains(t)) {
        resp.error_code = ResponseError::UnsupportedVersion.code();
        return resp;
    }
    let image = broker.metadata.image();
    let mut push = |name: String, resource_type: i8| {
        let mut r = ConfigResource::default();
        r.resource_name = StrBytes::from(name);
        r.resource_type = resource_type;
        resp.config_resources.push(r);
    };
    for kind in [ConfigResourceKind::Group, ConfigResourceKind::ClientMetrics] {
        if types.contains(&kind.kafka_type()) {
            for name in image.resource_configs.of(kind).keys() {
                push(name.clone(), kind.kafka_type());
            }
        }
    }
    for t in [BROKER_LOGGER, BROKER] {
        if types.contains(&t) {
            for b in image.brokers.values().filter(|b| b.alive) {
                push(b.id.to_string(), t);
            }
        }
    }
    if types.contains(&TOPIC) {
        for name in image.topics.keys() {
            push(name.clone(), TOPIC);
        }
    }
    resp
}
