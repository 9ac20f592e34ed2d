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
    /// partition epoch, replicas, isr, elr, adding, removing]}`.
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
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::model::{BrokerId, PartitionState};

    type Wire = (
        BrokerId,
        i32,
        i32,
        Vec<BrokerId>,
        Vec<BrokerId>,
        Vec<BrokerId>,
        Vec<BrokerId>,
        Vec<BrokerId>,
    );

    pub fn serialize<S: Serializer>(s: &PartitionState, serializer: S) -> Result<S::Ok, S::Error> {
        (
            s.leader,
            s.leader_epoch,
            s.partition_epoch,
            &s.replicas,
            &s.isr,
            &s.elr,
            &s.adding_replicas,
            &s.removing_replicas,
        )
            .serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PartitionState, D::Error> {
        let (leader, leader_epoch, partition_epoch, replicas, isr, elr, adding, removing) =
            Wire::deserialize(d)?;
        Ok(PartitionState {
            replicas,
            isr,
            elr,
            leader,
            leader_epoch,
            partition_epoch,
            adding_replicas: adding,
            removing_replicas: removing,
        })
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
}
