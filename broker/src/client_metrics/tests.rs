use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{GetTelemetrySubscriptionsRequest, PushTelemetryRequest};
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{
    metric, number_data_point, Gauge, Metric, MetricsData, NumberDataPoint, ResourceMetrics,
    ScopeMetrics, Sum,
};
use prost::Message;
use skein_controller::resource_configs::{ConfigResourceKind, ResourceConfigs};
use uuid::Uuid;

use super::*;

fn subscriptions(pairs: &[(&str, &[(&str, &str)])]) -> Arc<ResourceConfigs> {
    let mut c = ResourceConfigs::default();
    for (name, values) in pairs {
        let values: BTreeMap<String, String> = values
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        c.set(ConfigResourceKind::ClientMetrics, name, values);
    }
    Arc::new(c)
}

fn who(client_id: &str) -> Requester<'_> {
    Requester {
        client_id,
        software: None,
        peer: Some("127.0.0.1:5000".parse().unwrap()),
    }
}

fn get(m: &ClientMetrics, id: Uuid, c: &Arc<ResourceConfigs>) -> GetTelemetrySubscriptionsResponse {
    let mut req = GetTelemetrySubscriptionsRequest::default();
    req.client_instance_id = id;
    m.get_subscriptions(&req, &who("app-1"), c)
}

fn push(
    m: &ClientMetrics,
    id: Uuid,
    subscription_id: i32,
    payload: Vec<u8>,
    c: &Arc<ResourceConfigs>,
) -> i16 {
    let mut req = PushTelemetryRequest::default();
    req.client_instance_id = id;
    req.subscription_id = subscription_id;
    req.metrics = Bytes::from(payload);
    m.push(&req, &who("app-1"), c).error_code
}

/// An empty push under what `r` handed out.
fn push_request(r: &GetTelemetrySubscriptionsResponse) -> PushTelemetryRequest {
    let mut req = PushTelemetryRequest::default();
    req.client_instance_id = r.client_instance_id;
    req.subscription_id = r.subscription_id;
    req
}

fn kv(k: &str, v: &str) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(v.into())),
        }),
        ..Default::default()
    }
}

fn point(value: f64, attrs: Vec<KeyValue>) -> NumberDataPoint {
    NumberDataPoint {
        attributes: attrs,
        value: Some(number_data_point::Value::AsDouble(value)),
        ..Default::default()
    }
}

fn payload() -> Vec<u8> {
    let metrics = vec![
        Metric {
            name: "org.apache.kafka.producer.record.send.total".into(),
            description: "records sent".into(),
            data: Some(metric::Data::Sum(Sum {
                data_points: vec![point(42.0, vec![kv("topic", "t")])],
                aggregation_temporality: 2,
                is_monotonic: true,
            })),
            ..Default::default()
        },
        Metric {
            name: "org.apache.kafka.producer.io.wait.ratio".into(),
            data: Some(metric::Data::Gauge(Gauge {
                data_points: vec![point(0.5, vec![kv("client_id", "forged")])],
            })),
            ..Default::default()
        },
        Metric {
            name: "org.apache.kafka.consumer.fetch.total".into(),
            data: Some(metric::Data::Gauge(Gauge {
                data_points: vec![point(1.0, vec![])],
            })),
            ..Default::default()
        },
        Metric {
            name: "skein_broker_up".into(),
            data: Some(metric::Data::Gauge(Gauge {
                data_points: vec![point(1.0, vec![])],
            })),
            ..Default::default()
        },
    ];
    MetricsData {
        resource_metrics: vec![ResourceMetrics {
            scope_metrics: vec![ScopeMetrics {
                metrics,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

#[test]
fn a_client_gets_an_id_and_what_matching_subscriptions_ask() {
    let m = ClientMetrics::new(1 << 20);
    let none = subscriptions(&[]);
    let r = get(&m, Uuid::nil(), &none);
    assert_eq!(r.error_code, 0);
    assert!(!r.client_instance_id.is_nil(), "an id is handed out");
    assert!(r.requested_metrics.is_empty());
    assert_eq!(r.push_interval_ms, subscriptions::DEFAULT_INTERVAL_MS);
    assert_eq!(r.accepted_compression_types, vec![4, 3, 1, 2]);
    assert!(!r.delta_temporality, "cumulative, for Prometheus");

    let subs = subscriptions(&[
        (
            "producers",
            &[
                ("metrics", "org.apache.kafka.producer."),
                ("interval.ms", "1000"),
            ],
        ),
        (
            "others",
            &[("metrics", "x."), ("match", "client_id=other-.*")],
        ),
    ]);
    let r2 = get(&m, Uuid::nil(), &subs);
    assert_eq!(r2.push_interval_ms, 1000);
    let asked: Vec<&str> = r2.requested_metrics.iter().map(|s| s.as_str()).collect();
    assert_eq!(
        asked,
        ["org.apache.kafka.producer."],
        "only matching subscriptions"
    );
    let all = subscriptions(&[("all", &[("metrics", "*")]), ("p", &[("metrics", "a.")])]);
    let r3 = get(&m, Uuid::nil(), &all);
    let asked: Vec<&str> = r3.requested_metrics.iter().map(|s| s.as_str()).collect();
    assert_eq!(asked, ["*"]);
}

#[test]
fn requests_come_no_faster_than_the_interval_unless_the_subscription_changed() {
    let m = ClientMetrics::new(1 << 20);
    let subs = subscriptions(&[("p", &[("metrics", "org.apache.kafka.producer.")])]);
    let r = get(&m, Uuid::nil(), &subs);
    let id = r.client_instance_id;
    let again = get(&m, id, &subs);
    assert_eq!(
        again.error_code,
        ResponseError::ThrottlingQuotaExceeded.code()
    );
    // A push right after the get is on time; a second one is not.
    assert_eq!(push(&m, id, r.subscription_id, payload(), &subs), 0);
    assert_eq!(
        push(&m, id, r.subscription_id, payload(), &subs),
        ResponseError::ThrottlingQuotaExceeded.code()
    );
    // A changed subscription is answered at once, with a new id.
    let changed = subscriptions(&[("p", &[("metrics", "org.apache.kafka.")])]);
    let r2 = get(&m, id, &changed);
    assert_eq!(r2.error_code, 0);
    assert_ne!(r2.subscription_id, r.subscription_id);
    // A push under the old subscription id is refused; the client asks
    // again and is answered even within the interval.
    assert_eq!(
        push(&m, id, r.subscription_id, payload(), &changed),
        ResponseError::UnknownSubscriptionId.code()
    );
    assert_eq!(get(&m, id, &changed).error_code, 0);
}

#[test]
fn bad_pushes_get_kafkas_errors() {
    let m = ClientMetrics::new(64);
    let subs = subscriptions(&[("p", &[("metrics", "*")])]);
    assert_eq!(
        push(&m, Uuid::nil(), 0, vec![], &subs),
        ResponseError::InvalidRequest.code()
    );
    let r = get(&m, Uuid::nil(), &subs);
    let id = r.client_instance_id;
    assert_eq!(
        push(&m, id, r.subscription_id, vec![0; 65], &subs),
        ResponseError::TelemetryTooLarge.code()
    );
    let mut req = push_request(&get(&m, Uuid::nil(), &subs));
    req.compression_type = 9;
    let e = m.push(&req, &who("app-1"), &subs).error_code;
    assert_eq!(e, ResponseError::UnsupportedCompressionType.code());
    // Not OTLP.
    let r = get(&m, Uuid::nil(), &subs);
    assert_eq!(
        push(
            &m,
            r.client_instance_id,
            r.subscription_id,
            vec![0xff; 20],
            &subs
        ),
        ResponseError::InvalidRecord.code()
    );
    // After a terminating push, nothing more.
    let mut req = push_request(&get(&m, Uuid::nil(), &subs));
    req.terminating = true;
    assert_eq!(m.push(&req, &who("app-1"), &subs).error_code, 0);
    assert_eq!(
        m.push(&req, &who("app-1"), &subs).error_code,
        ResponseError::InvalidRequest.code()
    );
}

#[test]
fn pushed_values_are_exported_with_the_clients_labels_and_only_as_asked() {
    let m = ClientMetrics::new(1 << 20);
    // `skein` is asked for, but a client's name may not pose as Skein's.
    let subs = subscriptions(&[("p", &[("metrics", "org.apache.kafka.producer.,skein")])]);
    let r = get(&m, Uuid::nil(), &subs);
    assert_eq!(
        push(
            &m,
            r.client_instance_id,
            r.subscription_id,
            payload(),
            &subs
        ),
        0
    );
    let text = m.render();
    let id = kafka_uuid(r.client_instance_id);
    let line = text
        .lines()
        .find(|l| l.starts_with("org_apache_kafka_producer_record_send_total{"))
        .unwrap_or_else(|| panic!("no sent-records sample in:\n{text}"));
    assert!(
        line.contains(&format!("client_instance_id=\"{id}\"")),
        "{line}"
    );
    assert!(line.contains("client_id=\"app-1\""), "{line}");
    assert!(line.contains("topic=\"t\""), "{line}");
    assert!(line.ends_with(" 42"), "{line}");
    assert!(text.contains("# TYPE org_apache_kafka_producer_record_send_total counter"));
    let gauge = text
        .lines()
        .find(|l| l.starts_with("org_apache_kafka_producer_io_wait_ratio{"))
        .unwrap();
    assert!(
        gauge.contains("client_id=\"app-1\""),
        "a point cannot forge the client's labels: {gauge}"
    );
    assert!(!gauge.contains("forged"), "{gauge}");
    assert!(
        !text.contains("org_apache_kafka_consumer_fetch_total"),
        "not subscribed"
    );
    assert!(
        !text.contains("skein_broker_up"),
        "a client cannot pose as the broker"
    );
    assert!(
        text.contains("skein_client_telemetry_points_dropped_total 2"),
        "{text}"
    );
    assert!(
        text.contains("skein_client_telemetry_instances 1"),
        "{text}"
    );
    m.export.forget(r.client_instance_id);
    assert!(!m.render().contains("org_apache_kafka_producer"));
}
