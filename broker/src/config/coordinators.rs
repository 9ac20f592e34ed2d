//! The group and transaction coordinators' broker configs (`offsets.*`,
//! `group.*`, `transaction.*`, `transactional.id.*`), by their Kafka names.

use std::collections::BTreeMap;

use skein_controller::broker_config as keys;

use super::error::ConfigError;
use super::values::ReadKey;

/// The transaction coordinator's settings, by their Kafka names.
pub(super) fn txn_config(
    raw: &BTreeMap<String, String>,
) -> Result<crate::txn::TxnConfig, ConfigError> {
    Ok(crate::txn::TxnConfig {
        state_partitions: keys::TRANSACTION_STATE_LOG_NUM_PARTITIONS.value(raw)?,
        state_replication_factor: keys::TRANSACTION_STATE_LOG_REPLICATION_FACTOR.get(raw)?,
        state_min_isr: keys::TRANSACTION_STATE_LOG_MIN_ISR.value(raw)?,
        state_segment_bytes: keys::TRANSACTION_STATE_LOG_SEGMENT_BYTES.value(raw)?,
        max_timeout_ms: keys::TRANSACTION_MAX_TIMEOUT_MS.value(raw)?,
        id_expiration_ms: keys::TRANSACTIONAL_ID_EXPIRATION_MS.value(raw)?,
        abort_check_interval_ms: keys::TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS
            .value(raw)?,
        remove_expired_interval_ms:
            keys::TRANSACTION_REMOVE_EXPIRED_TRANSACTION_CLEANUP_INTERVAL_MS.value(raw)?,
        partition_verification: keys::TRANSACTION_PARTITION_VERIFICATION_ENABLE.value(raw)?,
    })
}

/// A setting and the bounds of a group's own value for it (INT keys).
fn bounded(
    raw: &BTreeMap<String, String>,
    v: &keys::BrokerKey,
    lo: &keys::BrokerKey,
    hi: &keys::BrokerKey,
) -> Result<crate::share::settings::Bounded, ConfigError> {
    Ok(crate::share::settings::Bounded::new(
        v.value::<i32>(raw)? as i64,
        lo.value::<i32>(raw)? as i64,
        hi.value::<i32>(raw)? as i64,
    ))
}

/// Share-group settings (KIP-932), by their Kafka names.
pub(super) fn share_config(
    raw: &BTreeMap<String, String>,
) -> Result<crate::share::settings::ShareConfig, ConfigError> {
    let b = |v, lo, hi| bounded(raw, v, lo, hi);
    Ok(crate::share::settings::ShareConfig {
        session_timeout_ms: b(
            &keys::GROUP_SHARE_SESSION_TIMEOUT_MS,
            &keys::GROUP_SHARE_MIN_SESSION_TIMEOUT_MS,
            &keys::GROUP_SHARE_MAX_SESSION_TIMEOUT_MS,
        )?,
        heartbeat_interval_ms: b(
            &keys::GROUP_SHARE_HEARTBEAT_INTERVAL_MS,
            &keys::GROUP_SHARE_MIN_HEARTBEAT_INTERVAL_MS,
            &keys::GROUP_SHARE_MAX_HEARTBEAT_INTERVAL_MS,
        )?,
        record_lock_duration_ms: b(
            &keys::GROUP_SHARE_RECORD_LOCK_DURATION_MS,
            &keys::GROUP_SHARE_MIN_RECORD_LOCK_DURATION_MS,
            &keys::GROUP_SHARE_MAX_RECORD_LOCK_DURATION_MS,
        )?,
        delivery_count_limit: b(
            &keys::GROUP_SHARE_DELIVERY_COUNT_LIMIT,
            &keys::GROUP_SHARE_MIN_DELIVERY_COUNT_LIMIT,
            &keys::GROUP_SHARE_MAX_DELIVERY_COUNT_LIMIT,
        )?,
        partition_max_record_locks: b(
            &keys::GROUP_SHARE_PARTITION_MAX_RECORD_LOCKS,
            &keys::GROUP_SHARE_MIN_PARTITION_MAX_RECORD_LOCKS,
            &keys::GROUP_SHARE_MAX_PARTITION_MAX_RECORD_LOCKS,
        )?,
        max_size: keys::GROUP_SHARE_MAX_SIZE.value::<i16>(raw)?.max(1) as usize,
        max_sessions: keys::GROUP_SHARE_MAX_SHARE_SESSIONS
            .value::<i32>(raw)?
            .max(1) as usize,
        ..Default::default()
    })
}

/// Streams-group settings (KIP-1071), by their Kafka names.
pub(super) fn streams_config(
    raw: &BTreeMap<String, String>,
) -> Result<crate::streams::settings::StreamsConfig, ConfigError> {
    use crate::share::settings::Bounded;
    let b = |v, lo, hi| bounded(raw, v, lo, hi);
    let protocols: String = keys::GROUP_COORDINATOR_REBALANCE_PROTOCOLS.value(raw)?;
    Ok(crate::streams::settings::StreamsConfig {
        enabled: protocols
            .split(',')
            .any(|p| p.trim().eq_ignore_ascii_case("streams")),
        session_timeout_ms: b(
            &keys::GROUP_STREAMS_SESSION_TIMEOUT_MS,
            &keys::GROUP_STREAMS_MIN_SESSION_TIMEOUT_MS,
            &keys::GROUP_STREAMS_MAX_SESSION_TIMEOUT_MS,
        )?,
        heartbeat_interval_ms: b(
            &keys::GROUP_STREAMS_HEARTBEAT_INTERVAL_MS,
            &keys::GROUP_STREAMS_MIN_HEARTBEAT_INTERVAL_MS,
            &keys::GROUP_STREAMS_MAX_HEARTBEAT_INTERVAL_MS,
        )?,
        assignment_interval_ms: b(
            &keys::GROUP_STREAMS_ASSIGNMENT_INTERVAL_MS,
            &keys::GROUP_STREAMS_MIN_ASSIGNMENT_INTERVAL_MS,
            &keys::GROUP_STREAMS_MAX_ASSIGNMENT_INTERVAL_MS,
        )?,
        num_standby_replicas: Bounded::new(
            keys::GROUP_STREAMS_NUM_STANDBY_REPLICAS.value::<i32>(raw)? as i64,
            0,
            keys::GROUP_STREAMS_MAX_STANDBY_REPLICAS.value::<i32>(raw)? as i64,
        ),
        initial_rebalance_delay_ms: keys::GROUP_STREAMS_INITIAL_REBALANCE_DELAY_MS
            .value::<i32>(raw)? as i64,
        task_offset_interval_ms: keys::GROUP_STREAMS_TASK_OFFSET_INTERVAL_MS.value::<i32>(raw)?
            as i64,
        acceptable_recovery_lag: keys::GROUP_STREAMS_ACCEPTABLE_RECOVERY_LAG.value(raw)?,
        max_size: keys::GROUP_STREAMS_MAX_SIZE.value::<i32>(raw)?.max(1) as usize,
    })
}

/// The share coordinator's topic settings.
pub(super) fn share_coordinator_config(
    raw: &BTreeMap<String, String>,
) -> Result<crate::share::settings::ShareCoordinatorConfig, ConfigError> {
    Ok(crate::share::settings::ShareCoordinatorConfig {
        partitions: keys::SHARE_COORDINATOR_STATE_TOPIC_NUM_PARTITIONS.value(raw)?,
        replication_factor: keys::SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR.get(raw)?,
        min_isr: keys::SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR.value(raw)?,
    })
}

/// The group coordinator's settings, by their Kafka names.
pub(super) fn group_config(
    raw: &BTreeMap<String, String>,
) -> Result<crate::group::GroupConfig, ConfigError> {
    Ok(crate::group::GroupConfig {
        offsets_partitions: keys::OFFSETS_TOPIC_NUM_PARTITIONS.value(raw)?,
        offsets_replication_factor: keys::OFFSETS_TOPIC_REPLICATION_FACTOR.get(raw)?,
        offsets_retention_ms: keys::OFFSETS_RETENTION_MINUTES
            .value::<i64>(raw)?
            .saturating_mul(60_000),
        offsets_retention_check_interval_ms: keys::OFFSETS_RETENTION_CHECK_INTERVAL_MS
            .value(raw)?,
        initial_rebalance_delay_ms: keys::GROUP_INITIAL_REBALANCE_DELAY_MS.value(raw)?,
        min_session_timeout_ms: keys::GROUP_MIN_SESSION_TIMEOUT_MS.value(raw)?,
        max_session_timeout_ms: keys::GROUP_MAX_SESSION_TIMEOUT_MS.value(raw)?,
        max_size: keys::GROUP_MAX_SIZE.value(raw)?,
        consumer_heartbeat_interval_ms: keys::GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS.value(raw)?,
        consumer_session_timeout_ms: keys::GROUP_CONSUMER_SESSION_TIMEOUT_MS.value(raw)?,
        consumer_heartbeat_interval_bounds: (
            keys::GROUP_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS.value(raw)?,
            keys::GROUP_CONSUMER_MAX_HEARTBEAT_INTERVAL_MS.value(raw)?,
        ),
        consumer_session_timeout_bounds: (
            keys::GROUP_CONSUMER_MIN_SESSION_TIMEOUT_MS.value(raw)?,
            keys::GROUP_CONSUMER_MAX_SESSION_TIMEOUT_MS.value(raw)?,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_coordinators_defaults_are_the_tables() {
        let raw = BTreeMap::new();
        // The coordinators' own defaults, for their tests, agree.
        assert_eq!(
            format!("{:?}", txn_config(&raw).unwrap()),
            format!("{:?}", crate::txn::TxnConfig::default())
        );
        assert_eq!(
            format!("{:?}", group_config(&raw).unwrap()),
            format!("{:?}", crate::group::GroupConfig::default())
        );
    }

    #[test]
    fn transaction_settings_defaults_and_refusals() {
        let c = txn_config(&BTreeMap::new()).unwrap();
        assert_eq!((c.state_partitions, c.max_timeout_ms), (50, 900_000));
        let raw = BTreeMap::from([("transaction.max.timeout.ms".to_string(), "0".to_string())]);
        assert!(txn_config(&raw).is_err());
        let raw = BTreeMap::from([(
            "transaction.state.log.num.partitions".to_string(),
            "7".to_string(),
        )]);
        assert_eq!(txn_config(&raw).unwrap().state_partitions, 7);
    }
}
