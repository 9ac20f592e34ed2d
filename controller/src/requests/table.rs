//! The table of control-plane requests: one entry per request, read by
//! `define_events!` ([`crate::event`]: the `Event` and `Reply` variants)
//! and `define_requests!` ([`crate::requests`]: the typed requests). Adding
//! a request starts with an entry here.

/// Hands the table of requests to `$then`, a macro that reads entries of
/// the form
///
/// ```text
/// /// docs
/// TypedName => EventVariant { field: Type, .. }
///     handler on_event_variant
///     wire [ProtoKind derived]
///     reply ReplyVariant { field: Type, .. } -> Output;
/// ```
///
/// The event's fields are the typed request's; the controller core calls
/// its method `handler` with them, in order (`define_dispatch!` in
/// `core/mod.rs`). The reply's fields (which request it answers, named as
/// the event's) are followed by `result: Result<Output, ControllerError>`.
///
/// `wire` says how the request crosses the control plane
/// (`rpc/request_wire.rs`):
///
/// * `[Kind derived]` is `request::Kind::Kind` carrying `pb::Kind`, whose
///   fields are the event's of the same names, each converted by its type's
///   `rpc::field_wire::Wire`. `broker` is the session's: never read from the
///   message, and not sent unless a message field is named for it.
/// * `[Kind derived { .. }]` writes the message as a pattern when its fields
///   have other names: `{ name: topic }` (message field `name` is the
///   event's `topic`), a field alone (`{ topic, partition }`: the same
///   name), `{ (target, cancel): target }` (two message fields are one
///   event field, whose `Wire` is a pair). Every event field other than `broker` is named once; message
///   fields left out are sent at their default.
/// * `[Kind by_hand]` is converted in `rpc/wire.rs`: `AlterScramCredentials`
///   alone, because a mechanism the controller does not know refuses the
///   whole request through one stand-in deletion (`rpc/security_wire.rs`),
///   a rule across both its lists that no conversion of one field can say.
/// * `[]` is not carried (the operator's own requests).
///
/// The reply is derived from the output type either way.
///
/// Not in the table, written out in `requests/mod.rs` and `event.rs` and
/// converted in `rpc/wire.rs` and `rpc/partition_wire.rs`:
///
/// * `CreateTopic`: its reply does not carry its output (the topic id; the
///   broker takes it from its own request), and its event is a
///   [`crate::event::NewTopic`], which callers build step by step.
/// * `AlterPartitions` and `ElectLeaders`: answered item by item, one
///   [`crate::Reply`] per proposal or partition and no result of their own.
/// * `AlterPartition`, one ISR proposal (older brokers send it; this
///   release sends `AlterPartitions`): its request is the item of
///   `AlterPartitions`, one [`crate::event::AlterPartitionRequest`] for
///   both, which a table entry would split into two types. `ElectLeader`
///   (one partition, from 0.1.0 brokers) reads as an `ElectLeaders` of one.
///
/// Types are written with `crate::` paths: the table expands where `$then` is.
macro_rules! with_requests {
    ($then:ident) => {
        $then! {
            /// A broker started (or restarted) and registered. A broker the
            /// controller still believes alive is treated as having restarted: it is
            /// fenced first, then re-joins as a follower of its partitions.
            /// A broker that comes back with another log directory id than it had
            /// (an empty disk) has lost every replica: they leave the ISR and ELR
            /// and must catch up from the leader before they count again.
            /// Answered with the new broker epoch.
            Register => BrokerRegistered {
                broker: crate::model::BrokerId,
                host: String,
                port: u16,
                rack: Option<String>,
                /// The `directory.id` of its log directory (`None`: not known).
                directory_id: Option<crate::model::DirectoryId>,
                /// The broker epoch it held when it last stopped cleanly, or the
                /// one it holds now when a running broker registers again (Kafka's
                /// `PreviousBrokerEpoch`). `None`, or another epoch than the last
                /// one registered, means it stopped uncleanly: it may have lost
                /// writes it had not flushed, so it leaves every ELR (KIP-966).
                previous_broker_epoch: Option<u64>,
                /// Its listeners (`advertised.listeners`); `host`/`port` are the
                /// inter-broker one. Empty: only `host`/`port`.
                endpoints: Vec<crate::model::Endpoint>,
                /// Its release and supported feature levels (unknown: a broker
                /// older than 0.2.0).
                software: crate::model::BrokerSoftware,
            }
                handler on_broker_registered
                wire [Register derived {
                    broker_id: broker,
                    host,
                    port,
                    rack,
                    directory_id,
                    previous_broker_epoch,
                    endpoints,
                    (software_version, supported_features): software,
                }]
                reply BrokerRegistered { broker: crate::model::BrokerId } -> u64;

            /// A broker is alive. Brokers whose last heartbeat is older than the
            /// session timeout are fenced on the next [`Event::Tick`].
            Heartbeat => BrokerHeartbeat {
                broker: crate::model::BrokerId,
                broker_epoch: u64,
            }
                handler on_heartbeat
                wire [Heartbeat derived]
                reply Heartbeat { broker: crate::model::BrokerId } -> ();

            /// A broker wants to stop: leadership is moved off it first; the
            /// answer is `Ok` once it leads nothing and may stop.
            ControlledShutdown => ControlledShutdownRequested {
                broker: crate::model::BrokerId,
                broker_epoch: u64,
            }
                handler on_controlled_shutdown
                wire [ControlledShutdown derived]
                reply ControlledShutdown { broker: crate::model::BrokerId } -> ();

            /// `CreatePartitions`: grow `topic` to `count` partitions.
            CreatePartitions => CreatePartitions {
                topic: String,
                count: u32,
                /// Replicas for each new partition; placed automatically if `None`.
                assignment: Option<Vec<Vec<crate::model::BrokerId>>>,
            }
                handler on_create_partitions
                wire [CreatePartitions derived]
                reply CreatePartitions { topic: String } -> ();

            /// The topic's configs are replaced by `configs`.
            AlterConfigs => TopicConfigChanged {
                topic: String,
                configs: std::collections::BTreeMap<String, String>,
            }
                handler on_config_changed
                wire [AlterConfigs derived]
                reply AlterConfigs { topic: String } -> ();

            /// `DeleteTopics`.
            DeleteTopic => DeleteTopic { topic: String }
                handler on_delete_topic
                wire [DeleteTopic derived { name: topic }]
                reply DeleteTopic { topic: String } -> ();

            /// `AlterPartitionReassignments` for one partition: move it to `target`,
            /// or cancel the running reassignment when `target` is `None`.
            /// `throttled`: the controller names the move's replicas in the topic's
            /// throttle lists while it runs (the operator's own moves; a Kafka
            /// client's sets its lists itself, as `kafka-reassign-partitions
            /// --throttle` does).
            ReassignPartition => ReassignPartition {
                topic: String,
                partition: u32,
                target: Option<Vec<crate::model::BrokerId>>,
                throttled: bool,
            }
                handler on_reassign
                wire [ReassignPartition derived { topic, partition, (target, cancel): target, throttled }]
                reply ReassignPartition { topic: String, partition: u32 } -> ();

            /// The topic's replication factor becomes `replication_factor` (a Topic
            /// resource's `spec.replicationFactor` changed): every partition whose
            /// target has another number of replicas is reassigned
            /// ([`crate::replication_factor`]: replicas added on the least-loaded
            /// brokers and racks, or removed, never the leader), and partitions
            /// added later get it. Applied to every partition or to none.
            /// Answered with how many partitions a reassignment was started (or
            /// replaced) for; 0 when every partition had the replication factor
            /// already.
            AlterReplicationFactor => AlterReplicationFactor {
                topic: String,
                replication_factor: u16,
            }
                handler on_alter_replication_factor
                wire []
                reply AlterReplicationFactor { topic: String } -> u32;

            /// Finalize `feature` at `level` ([`crate::features`]): refused unless
            /// the controller and every registered broker support it, and levels
            /// are never lowered. `validate_only` checks without changing anything.
            /// Answered with the level `feature` was at before.
            UpdateFeature => UpdateFeature {
                feature: String,
                level: i16,
                validate_only: bool,
            }
                handler on_update_feature
                wire [UpdateFeature derived { name: feature, level, validate_only }]
                reply UpdateFeature { feature: String } -> i16;

            /// `AllocateProducerIds` from a broker.
            AllocateProducerIds => AllocateProducerIds {
                broker: crate::model::BrokerId,
                broker_epoch: u64,
            }
                handler on_allocate_producer_ids
                wire [AllocateProducerIds derived]
                reply AllocateProducerIds { broker: crate::model::BrokerId }
                -> crate::model::ProducerIdBlock;

            /// What a broker's replicas of leaderless partitions hold (their last
            /// leader epoch and log end offset), sent when it is told a partition
            /// it hosts has no leader: the controller elects the longest log when
            /// no ISR or ELR member is left (unclean recovery, KIP-966). A report
            /// of an earlier incarnation is refused.
            ReportReplicaLogs => ReplicaLogsReported {
                broker: crate::model::BrokerId,
                broker_epoch: u64,
                logs: Vec<crate::unclean_recovery::ReplicaLog>,
            }
                handler on_replica_logs_reported
                wire [ReportReplicaLogs derived]
                reply ReportReplicaLogs { broker: crate::model::BrokerId } -> ();

            /// `AlterUserScramCredentials`: add or replace credentials, delete
            /// others (deleting one that does not exist changes nothing). Applied
            /// whole or not at all.
            AlterScramCredentials => AlterScramCredentials {
                upsertions: Vec<crate::scram::ScramUpsertion>,
                deletions: Vec<(String, crate::scram::ScramMechanism)>,
            }
                handler on_alter_scram_credentials
                wire [AlterScramCredentials by_hand]
                reply AlterScramCredentials {} -> ();

            /// `CreateDelegationToken`: store a token a broker made (its id,
            /// owner, renewers and times). Refused when the id exists, or
            /// below `skein.version` 4.
            CreateDelegationToken => CreateDelegationToken {
                token: crate::delegation_tokens::DelegationToken,
            }
                handler on_create_delegation_token
                wire [CreateDelegationToken derived]
                reply CreateDelegationToken {} -> ();

            /// `RenewDelegationToken` and `ExpireDelegationToken` (and the
            /// brokers' sweep of expired tokens): the token's expiry becomes
            /// `expiry_ms`, capped at its maximum, or the token is removed
            /// (`None`). A token that is gone is `DELEGATION_TOKEN_NOT_FOUND`.
            SetDelegationTokenExpiry => SetDelegationTokenExpiry {
                token_id: String,
                expiry_ms: Option<i64>,
            }
                handler on_set_delegation_token_expiry
                wire [SetDelegationTokenExpiry derived]
                reply SetDelegationTokenExpiry { token_id: String } -> ();

            /// `AlterClientQuotas`: set or remove quota values, applied whole.
            AlterClientQuotas => AlterClientQuotas {
                changes: Vec<crate::quotas::QuotaChange>,
            }
                handler on_alter_client_quotas
                wire [AlterClientQuotas derived]
                reply AlterClientQuotas {} -> ();

            /// `IncrementalAlterConfigs`/`AlterConfigs` on broker resources: set or
            /// remove dynamic broker configs, applied whole.
            AlterBrokerConfigs => AlterBrokerConfigs {
                changes: Vec<crate::broker_configs::BrokerConfigChange>,
            }
                handler on_alter_broker_configs
                wire [AlterBrokerConfigs derived]
                reply AlterBrokerConfigs {} -> ();

            /// `IncrementalAlterConfigs`/`AlterConfigs` on CLIENT_METRICS and
            /// GROUP resources: the resource's whole new set of values (empty:
            /// removed), checked by the broker. Refused below `skein.version` 5.
            AlterResourceConfigs => AlterResourceConfigs {
                kind: crate::resource_configs::ConfigResourceKind,
                name: String,
                configs: std::collections::BTreeMap<String, String>,
            }
                handler on_alter_resource_configs
                wire [AlterResourceConfigs derived]
                reply AlterResourceConfigs {} -> ();

            /// `CreateAcls`: add bindings, applied whole.
            CreateAcls => CreateAcls {
                bindings: Vec<crate::acls::AclBinding>,
            }
                handler on_create_acls
                wire [CreateAcls derived]
                reply CreateAcls {} -> ();

            /// `DeleteAcls`: remove every binding a filter matches. Answered
            /// with, per filter, the bindings it matched (all are deleted).
            DeleteAcls => DeleteAcls {
                filters: Vec<crate::acls::AclFilter>,
            }
                handler on_delete_acls
                wire [DeleteAcls derived]
                reply DeleteAcls {} -> Vec<Vec<crate::acls::AclBinding>>;
        }
    };
}
pub(crate) use with_requests;
