//! Conversions of the metadata view (whole, and deltas between versions)
//! to and from the control-plane messages.

use super::acl_wire as aw;
use super::config_wire as cw;
use super::field_wire::{uuid_from, Wire};
use super::pb;
use super::security_wire as sw;
use crate::model::Endpoint;
use crate::view::{BrokerView, ClusterView, PartitionView, TopicView};

/// A broker's listeners, in the view and in `Register`; a port out of
/// range drops the entry.
impl Wire for Vec<Endpoint> {
    type Pb = Vec<pb::Endpoint>;
    fn to_pb(&self) -> Vec<pb::Endpoint> {
        self.iter()
            .map(|e| pb::Endpoint {
                name: e.name.clone(),
                host: e.host.clone(),
                port: e.port as u32,
            })
            .collect()
    }
    fn from_pb(endpoints: Vec<pb::Endpoint>) -> Self {
        endpoints
            .into_iter()
            .filter_map(|e| {
                Some(Endpoint {
                    name: e.name,
                    host: e.host,
                    port: u16::try_from(e.port).ok()?,
                })
            })
            .collect()
    }
}

pub fn view_to_pb(v: &ClusterView) -> pb::MetadataView {
    pb::MetadataView {
        cluster_id: v.cluster_id.clone(),
        controller_id: v.controller_id,
        brokers: v
            .brokers
            .values()
            .map(|b| pb::BrokerView {
                id: b.id,
                host: b.host.clone(),
                port: b.port as u32,
                rack: b.rack.clone(),
                alive: b.alive,
                storage_lost: b.storage_lost,
                storage_losses: b.storage_losses,
                endpoints: b.endpoints.to_pb(),
                broker_epoch: b.broker_epoch,
                in_controlled_shutdown: b.in_controlled_shutdown,
                software_version: b.software_version.clone(),
            })
            .collect(),
        topics: v.topics.values().map(|t| topic_to_pb(t)).collect(),
        scram_credentials: sw::scram_credentials_to_pb(&v.scram_credentials),
        client_quotas: sw::client_quotas_to_pb(&v.client_quotas),
        acls: v.acls.iter().map(aw::binding_to_pb).collect(),
        broker_configs: cw::broker_configs_to_pb(&v.broker_configs),
        delegation_tokens: sw::delegation_tokens_to_pb(&v.delegation_tokens),
        resource_configs: cw::resource_configs_to_pb(&v.resource_configs),
        version: v.version,
        base_version: 0,
        deleted_topics: Vec::new(),
        finalized_features: v
            .features
            .finalized
            .iter()
            .map(|(k, l)| (k.clone(), i32::from(*l)))
            .collect(),
        controller_features: v.features.controller.to_pb(),
    }
}

fn topic_to_pb(t: &TopicView) -> pb::TopicView {
    pb::TopicView {
        name: t.name.clone(),
        topic_id: t.id.as_bytes().to_vec(),
        configs: t.configs.clone().into_iter().collect(),
        partitions: t
            .partitions
            .iter()
            .map(|p| pb::PartitionView {
                replicas: p.replicas.clone(),
                isr: p.isr.clone(),
                leader: p.leader,
                leader_epoch: p.leader_epoch,
                adding_replicas: p.adding_replicas.clone(),
                removing_replicas: p.removing_replicas.clone(),
                elr: p.elr.clone(),
                last_known_elr: p.last_known_elr.clone(),
                ..Default::default()
            })
            .collect(),
    }
}

/// `v` as a delta from the view of version `base`: only the topics in
/// `changed` (those `v` no longer has as deleted), everything else whole.
pub fn view_delta_to_pb(
    v: &ClusterView,
    base: u64,
    changed: &std::collections::BTreeSet<String>,
) -> pb::MetadataView {
    let mut m = view_to_pb(&ClusterView {
        topics: Default::default(),
        ..v.clone()
    });
    m.base_version = base;
    for name in changed {
        match v.topics.get(name) {
            Some(t) => m.topics.push(topic_to_pb(t)),
            None => m.deleted_topics.push(name.clone()),
        }
    }
    m
}

/// The view a message describes, applied to `current` when it is a delta.
/// A delta from another version than `current`'s is refused (the session
/// must start again with a whole view).
pub fn apply_view_pb(
    current: &ClusterView,
    mut m: pb::MetadataView,
) -> Result<ClusterView, String> {
    let base = m.base_version;
    if base == 0 {
        return Ok(view_from_pb(m));
    }
    if base != current.version {
        return Err(format!(
            "metadata delta from version {base}, but this broker has version {}",
            current.version
        ));
    }
    let deleted = std::mem::take(&mut m.deleted_topics);
    let mut next = view_from_pb(m);
    let mut topics = current.topics.clone();
    for name in &deleted {
        topics.remove(name);
    }
    topics.append(&mut next.topics);
    next.topics = topics;
    Ok(next.index_ids())
}

pub fn view_from_pb(v: pb::MetadataView) -> ClusterView {
    ClusterView {
        cluster_id: v.cluster_id,
        version: v.version,
        controller_id: v.controller_id,
        brokers: v
            .brokers
            .into_iter()
            .map(|b| {
                (
                    b.id,
                    BrokerView {
                        id: b.id,
                        host: b.host,
                        port: b.port as u16,
                        rack: b.rack,
                        alive: b.alive,
                        storage_lost: b.storage_lost,
                        storage_losses: b.storage_losses,
                        endpoints: Wire::from_pb(b.endpoints),
                        broker_epoch: b.broker_epoch,
                        in_controlled_shutdown: b.in_controlled_shutdown,
                        software_version: b.software_version,
                    },
                )
            })
            .collect(),
        topics: v
            .topics
            .into_iter()
            .map(|t| {
                let meta = TopicView {
                    name: t.name.clone(),
                    id: uuid_from(&t.topic_id),
                    configs: t.configs.into_iter().collect(),
                    partitions: t
                        .partitions
                        .into_iter()
                        .map(|p| PartitionView {
                            replicas: p.replicas,
                            isr: p.isr,
                            leader: p.leader,
                            leader_epoch: p.leader_epoch,
                            adding_replicas: p.adding_replicas,
                            removing_replicas: p.removing_replicas,
                            elr: p.elr,
                            last_known_elr: p.last_known_elr,
                        })
                        .collect(),
                };
                (t.name, std::sync::Arc::new(meta))
            })
            .collect(),
        topic_names_by_id: Default::default(),
        scram_credentials: std::sync::Arc::new(sw::scram_credentials_from_pb(v.scram_credentials)),
        client_quotas: std::sync::Arc::new(sw::client_quotas_from_pb(v.client_quotas)),
        acls: std::sync::Arc::new(aw::bindings_from_pb(v.acls).into_iter().collect()),
        broker_configs: std::sync::Arc::new(cw::broker_configs_from_pb(v.broker_configs)),
        delegation_tokens: std::sync::Arc::new(sw::delegation_tokens_from_pb(v.delegation_tokens)),
        resource_configs: std::sync::Arc::new(cw::resource_configs_from_pb(v.resource_configs)),
        features: super::feature_wire::view_features_from_pb(
            v.finalized_features,
            v.controller_features,
        ),
    }
    .index_ids()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::pb::request;
    use crate::rpc::wire::{event_from_pb, event_to_pb};
    use crate::Event;

    fn broker(endpoints: Vec<Endpoint>) -> BrokerView {
        BrokerView {
            id: 1,
            host: "10.0.0.1".into(),
            port: 9092,
            rack: None,
            alive: true,
            storage_lost: false,
            storage_losses: 0,
            endpoints,
            broker_epoch: 7,
            in_controlled_shutdown: true,
            software_version: Some("0.2.0".into()),
        }
    }

    fn ep(name: &str, host: &str, port: u16) -> Endpoint {
        Endpoint {
            name: name.into(),
            host: host.into(),
            port,
        }
    }

    #[test]
    fn registrations_and_views_carry_every_listener() {
        let endpoints = vec![
            ep("INTERNAL", "10.0.0.1", 9092),
            ep("EXTERNAL", "kafka.example.com", 30094),
        ];
        let reg = Event::BrokerRegistered {
            broker: 1,
            host: "10.0.0.1".into(),
            port: 9092,
            rack: None,
            directory_id: None,
            previous_broker_epoch: None,
            endpoints: endpoints.clone(),
            software: Default::default(),
        };
        let Some(request::Kind::Register(r)) = event_to_pb(&reg) else {
            panic!("a registration goes over the wire");
        };
        assert_eq!(
            event_from_pb(1, request::Kind::Register(r)),
            reg,
            "registration round trip"
        );

        let mut view = ClusterView::default();
        view.brokers.insert(1, broker(endpoints.clone()));
        let back = view_from_pb(view_to_pb(&view));
        assert_eq!(back.brokers[&1], view.brokers[&1], "the whole broker");
    }

    #[test]
    fn a_broker_is_reached_through_the_listener_asked_on() {
        let b = broker(vec![
            ep("INTERNAL", "10.0.0.1", 9092),
            ep("EXTERNAL", "kafka.example.com", 30094),
        ]);
        assert_eq!(
            b.endpoint(Some("EXTERNAL")),
            Some(("kafka.example.com", 30094))
        );
        assert_eq!(b.endpoint(Some("INTERNAL")), Some(("10.0.0.1", 9092)));
        // Kafka leaves a broker without the listener out of the answer.
        assert_eq!(b.endpoint(Some("SSL")), None);
        // No listener given, or a broker that registered no names: host/port.
        assert_eq!(b.endpoint(None), Some(("10.0.0.1", 9092)));
        assert_eq!(
            broker(vec![]).endpoint(Some("SSL")),
            Some(("10.0.0.1", 9092))
        );
    }
}
