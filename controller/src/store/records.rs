//! Metadata records: the small changes the metadata log holds, one per
//! changed object (Kafka's `__cluster_metadata` holds records of the same
//! grain: a broker registration, a topic, one partition's state). A batch
//! of records is what one controller event changed; a snapshot is the
//! records that rebuild a whole image.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::command::Command;
use crate::model::{BrokerInfo, ClusterState, MetadataImage, PartitionState, TopicId, TopicImage};
use crate::scram::{ScramCredential, ScramMechanism};

/// One change to the image. Applying a record twice in a row leaves the
/// image as applying it once (a batch retried after an ambiguous write may
/// be in the log twice).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MetadataRecord {
    /// A broker registration (new, changed, fenced, shutting down).
    Broker { broker: BrokerInfo },
    /// A topic's definition; a new topic id replaces a topic of the same
    /// name, an unchanged one keeps its partitions.
    Topic { spec: crate::model::TopicDefinition },
    /// One partition's state; partition numbers of a topic are persisted
    /// in order, so a number one past the last adds a partition. The most
    /// frequent record by far, so it is written compactly:
    /// `{"type":"p","t":topic,"p":partition,"s":[leader, leader epoch,
    /// partition epoch, replicas, isr, elr, adding, removing]}`, and a last
    /// known ELR after them only when there is one (`skein.version` 4: a
    /// log of an older level never holds it, so older releases read it).
    #[serde(rename = "p")]
    Partition {
        #[serde(rename = "t")]
        topic: String,
        #[serde(rename = "p")]
        partition: u32,
        #[serde(rename = "s", with = "compact_state")]
        state: PartitionState,
    },
    /// The topic with this id is gone.
    DeleteTopic { topic: String, topic_id: TopicId },
    /// The cluster counters (producer ids, broker epochs).
    Cluster { cluster: ClusterState },
    /// Every client quota (they are few).
    ClientQuotas { quotas: crate::quotas::ClientQuotas },
    /// Every ACL.
    Acls { acls: crate::acls::Acls },
    /// Every dynamic broker config.
    BrokerConfigs {
        configs: crate::broker_configs::BrokerConfigs,
    },
    /// One user's SCRAM credentials; none left removes the user.
    ScramUser {
        user: String,
        credentials: BTreeMap<ScramMechanism, ScramCredential>,
    },
    /// One user's SCRAM credentials sealed with the store's key
    /// (`super::seal`): `key` is the key's id, `sealed` the base64 of nonce,
    /// ciphertext and tag. Written instead of `ScramUser` once the cluster
    /// is finalized at `skein.version` 3 on a store with a key; the log
    /// opens it into a `ScramUser` before applying it.
    SealedScramUser {
        user: String,
        key: String,
        sealed: String,
    },
    /// One delegation token (`None`: it is gone). Written only at
    /// `skein.version` 4 and later.
    DelegationToken {
        token_id: String,
        token: Option<crate::delegation_tokens::DelegationToken>,
    },
    /// One client-metrics subscription's or group's whole config set
    /// (empty: it is gone). Written only at `skein.version` 5 and later.
    ResourceConfigs {
        kind: crate::resource_configs::ConfigResourceKind,
        name: String,
        configs: BTreeMap<String, String>,
    },
}

impl MetadataRecord {
    /// The record a persistence command asks for (`None` for commands that
    /// persist nothing).
    pub fn from_command(command: &Command) -> Option<MetadataRecord> {
        Some(match command {
            Command::PersistBroker(info) => MetadataRecord::Broker {
                broker: info.clone(),
            },
            Command::PersistTopic(spec) => MetadataRecord::Topic { spec: spec.clone() },
            Command::PersistPartition {
                topic,
                partition,
                state,
                ..
            } => MetadataRecord::Partition {
                topic: topic.clone(),
                partition: *partition,
                state: state.clone(),
            },
            Command::DeleteTopic { topic, topic_id } => MetadataRecord::DeleteTopic {
                topic: topic.clone(),
                topic_id: *topic_id,
            },
            Command::PersistCluster(cluster) => MetadataRecord::Cluster {
                cluster: cluster.clone(),
            },
            Command::PersistClientQuotas(quotas) => MetadataRecord::ClientQuotas {
                quotas: quotas.clone(),
            },
            Command::PersistAcls(acls) => MetadataRecord::Acls { acls: acls.clone() },
            Command::PersistBrokerConfigs(configs) => MetadataRecord::BrokerConfigs {
                configs: configs.clone(),
            },
            Command::PersistScramCredentials { user, credentials } => MetadataRecord::ScramUser {
                user: user.clone(),
                credentials: credentials.clone(),
            },
            Command::PersistDelegationToken { token_id, token } => {
                MetadataRecord::DelegationToken {
                    token_id: token_id.clone(),
                    token: token.clone(),
                }
            }
            Command::PersistResourceConfigs {
                kind,
                name,
                configs,
            } => MetadataRecord::ResourceConfigs {
                kind: *kind,
                name: name.clone(),
                configs: configs.clone(),
            },
            _ => return None,
        })
    }

    /// The records that rebuild `image` from an empty one, topics'
    /// partitions after their topic.
    pub fn snapshot(image: &MetadataImage) -> Vec<MetadataRecord> {
        let mut out = vec![MetadataRecord::Cluster {
            cluster: image.cluster.clone(),
        }];
        out.extend(
            image
                .brokers
                .values()
                .map(|b| MetadataRecord::Broker { broker: b.clone() }),
        );
        if !image.client_quotas.is_empty() {
            out.push(MetadataRecord::ClientQuotas {
                quotas: image.client_quotas.clone(),
            });
        }
        if !image.acls.is_empty() {
            out.push(MetadataRecord::Acls {
                acls: image.acls.clone(),
            });
        }
        if !image.broker_configs.is_empty() {
            out.push(MetadataRecord::BrokerConfigs {
                configs: image.broker_configs.clone(),
            });
        }
        out.extend(image.scram_credentials.iter().map(|(user, credentials)| {
            MetadataRecord::ScramUser {
                user: user.clone(),
                credentials: credentials.clone(),
            }
        }));
        out.extend(image.delegation_tokens.iter().map(|(token_id, token)| {
            MetadataRecord::DelegationToken {
                token_id: token_id.clone(),
                token: Some(token.clone()),
            }
        }));
        out.extend(image.resource_configs.iter().map(|(kind, name, configs)| {
            MetadataRecord::ResourceConfigs {
                kind,
                name: name.clone(),
                configs: configs.clone(),
            }
        }));
        for (name, t) in &image.topics {
            out.push(MetadataRecord::Topic {
                spec: t.spec.clone(),
            });
            out.extend(t.partitions.iter().enumerate().map(|(p, state)| {
                MetadataRecord::Partition {
                    topic: name.clone(),
                    partition: p as u32,
                    state: state.clone(),
                }
            }));
        }
        out
    }

    /// Applies the record to `image`. An error means the log is not one
    /// this controller wrote (a partition of an unknown topic, or one out
    /// of order), or a sealed record that was not opened first (only the
    /// log has the key).
    pub fn apply(&self, image: &mut MetadataImage) -> Result<(), String> {
        match self {
            MetadataRecord::Broker { broker } => {
                image.brokers.insert(broker.id, broker.clone());
            }
            MetadataRecord::Topic { spec } => match image.topics.get_mut(&spec.name) {
                Some(t) if t.spec.topic_id == spec.topic_id => t.spec = spec.clone(),
                _ => {
                    image.topics.insert(
                        spec.name.clone(),
                        TopicImage {
                            spec: spec.clone(),
                            partitions: Vec::new(),
                        },
                    );
                }
            },
            MetadataRecord::Partition {
                topic,
                partition,
                state,
            } => {
                let t = image
                    .topics
                    .get_mut(topic)
                    .ok_or_else(|| format!("partition {topic}-{partition} of an unknown topic"))?;
                let p = *partition as usize;
                match p.cmp(&t.partitions.len()) {
                    std::cmp::Ordering::Less => t.partitions[p] = state.clone(),
                    std::cmp::Ordering::Equal => t.partitions.push(state.clone()),
                    std::cmp::Ordering::Greater => {
                        return Err(format!(
                            "partition {topic}-{partition} recorded before partition {}",
                            t.partitions.len()
                        ))
                    }
                }
            }
            MetadataRecord::DeleteTopic { topic, topic_id } => {
                if image.topics.get(topic).map(|t| t.spec.topic_id) == Some(*topic_id) {
                    image.topics.remove(topic);
                }
            }
            MetadataRecord::Cluster { cluster } => image.cluster = cluster.clone(),
            MetadataRecord::ClientQuotas { quotas } => image.client_quotas = quotas.clone(),
            MetadataRecord::Acls { acls } => image.acls = acls.clone(),
            MetadataRecord::BrokerConfigs { configs } => image.broker_configs = configs.clone(),
            MetadataRecord::ScramUser { user, credentials } => {
                if credentials.is_empty() {
                    image.scram_credentials.remove(user);
                } else {
                    image
                        .scram_credentials
                        .insert(user.clone(), credentials.clone());
                }
            }
            MetadataRecord::DelegationToken { token_id, token } => match token {
                Some(t) => {
                    image.delegation_tokens.insert(token_id.clone(), t.clone());
                }
                None => {
                    image.delegation_tokens.remove(token_id);
                }
            },
            MetadataRecord::ResourceConfigs {
                kind,
                name,
                configs,
            } => image.resource_configs.set(*kind, name, configs.clone()),
            MetadataRecord::SealedScramUser { user, .. } => {
                return Err(format!(
                    "the sealed SCRAM credentials of user {user:?} must be opened before they are applied"
                ))
            }
        }
        Ok(())
    }
}

/// A partition state as one JSON array (see [`MetadataRecord::Partition`]).
mod compact_state {
    use serde::de::{Error, SeqAccess, Visitor};
    use serde::ser::SerializeSeq;
    use serde::{Deserializer, Serializer};

    use crate::model::{BrokerId, PartitionState};

    pub fn serialize<S: Serializer>(s: &PartitionState, serializer: S) -> Result<S::Ok, S::Error> {
        let n = if s.last_known_elr.is_empty() { 8 } else { 9 };
        let mut seq = serializer.serialize_seq(Some(n))?;
        seq.serialize_element(&s.leader)?;
        seq.serialize_element(&s.leader_epoch)?;
        seq.serialize_element(&s.partition_epoch)?;
        seq.serialize_element(&s.replicas)?;
        seq.serialize_element(&s.isr)?;
        seq.serialize_element(&s.elr)?;
        seq.serialize_element(&s.adding_replicas)?;
        seq.serialize_element(&s.removing_replicas)?;
        if !s.last_known_elr.is_empty() {
            seq.serialize_element(&s.last_known_elr)?;
        }
        seq.end()
    }

    struct State;

    impl<'de> Visitor<'de> for State {
        type Value = PartitionState;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a partition state of 8 or 9 elements")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<PartitionState, A::Error> {
            let mut at = 0;
            let mut next = |seq: &mut A| {
                at += 1;
                seq.next_element::<Vec<BrokerId>>()?
                    .ok_or_else(|| A::Error::invalid_length(at + 2, &"8 or 9 elements"))
            };
            let leader = seq
                .next_element()?
                .ok_or_else(|| A::Error::invalid_length(0, &"8 or 9 elements"))?;
            let leader_epoch = seq
                .next_element()?
                .ok_or_else(|| A::Error::invalid_length(1, &"8 or 9 elements"))?;
            let partition_epoch = seq
                .next_element()?
                .ok_or_else(|| A::Error::invalid_length(2, &"8 or 9 elements"))?;
            let replicas = next(&mut seq)?;
            let isr = next(&mut seq)?;
            let elr = next(&mut seq)?;
            let adding_replicas = next(&mut seq)?;
            let removing_replicas = next(&mut seq)?;
            let last_known_elr = seq.next_element()?.unwrap_or_default();
            if seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                return Err(A::Error::invalid_length(10, &"8 or 9 elements"));
            }
            Ok(PartitionState {
                replicas,
                isr,
                elr,
                last_known_elr,
                leader,
                leader_epoch,
                partition_epoch,
                adding_replicas,
                removing_replicas,
            })
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PartitionState, D::Error> {
        d.deserialize_seq(State)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_record_is_compact_and_round_trips() {
        let r = MetadataRecord::Partition {
            topic: "orders".into(),
            partition: 7,
            state: PartitionState {
                replicas: vec![1, 2, 3],
                isr: vec![2, 3],
                elr: vec![1],
                last_known_elr: vec![],
                leader: 2,
                leader_epoch: 4,
                partition_epoch: 9,
                adding_replicas: vec![],
                removing_replicas: vec![5],
            },
        };
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(
            text,
            r#"{"type":"p","t":"orders","p":7,"s":[2,4,9,[1,2,3],[2,3],[1],[],[5]]}"#
        );
        assert_eq!(serde_json::from_str::<MetadataRecord>(&text).unwrap(), r);
    }

    /// A last known ELR is a 9th element, written only when there is one:
    /// what older releases wrote (and read) stays 8 elements.
    #[test]
    fn a_last_known_elr_is_a_ninth_element_only_when_there_is_one() {
        let mut state = PartitionState::new(vec![1, 2, 3], vec![], crate::NO_LEADER);
        state.elr = vec![2];
        state.last_known_elr = vec![1, 3];
        let r = MetadataRecord::Partition {
            topic: "t".into(),
            partition: 0,
            state,
        };
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(
            text,
            r#"{"type":"p","t":"t","p":0,"s":[-1,0,0,[1,2,3],[],[2],[],[],[1,3]]}"#
        );
        assert_eq!(serde_json::from_str::<MetadataRecord>(&text).unwrap(), r);
        for bad in [
            r#"{"type":"p","t":"t","p":0,"s":[-1,0,0,[1],[],[2],[]]}"#,
            r#"{"type":"p","t":"t","p":0,"s":[-1,0,0,[1],[],[2],[],[],[1],[2]]}"#,
        ] {
            assert!(
                serde_json::from_str::<MetadataRecord>(bad).is_err(),
                "{bad}"
            );
        }
    }
}
