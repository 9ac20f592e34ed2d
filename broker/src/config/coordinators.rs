//! The group and transaction coordinators' broker configs (`offsets.*`,
//! `group.*`, `transaction.*`, `transactional.id.*`), by their Kafka names.

use std::collections::BTreeMap;

use super::{boolean, num, ConfigError};

/// The transaction coordinator's settings, by their Kafka names.
pub(super) fn txn_config(
    raw: &BTreeMap<String, String>,
) -> Result<crate::txn::TxnConfig, ConfigError> {
    let d = crate::txn::TxnConfig::default();
    let cfg = crate::txn::TxnConfig {
        state_partitions: num(
            raw,
            "transaction.state.log.num.partitions",
            d.state_partitions,
        )?,
        state_replication_factor: match raw.get("transaction.state.log.replication.factor") {
            Some(_) => Some(num(raw, "transaction.state.log.replication.factor", 3i16)?),
            None => None,
        },
        state_min_isr: num(raw, "transaction.state.log.min.isr", d.state_min_isr)?,
        state_segment_bytes: num(
            raw,
            "transaction.state.log.segment.bytes",
            d.state_segment_bytes,
        )?,
        max_timeout_ms: num(raw, "transaction.max.timeout.ms", d.max_timeout_ms)?,
        id_expiration_ms: num(raw, "transactional.id.expiration.ms", d.id_expiration_ms)?,
        abort_check_interval_ms: num(
            raw,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            d.abort_check_interval_ms,
        )?,
        remove_expired_interval_ms: num(
            raw,
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            d.remove_expired_interval_ms,
        )?,
        partition_verification: boolean(
            raw,
            "transaction.partition.verification.enable",
            d.partition_verification,
        )?,
    };
    let positive = [
        (
            "transaction.state.log.num.partitions",
            cfg.state_partitions as i64,
        ),
        ("transaction.max.timeout.ms", cfg.max_timeout_ms as i64),
        ("transactional.id.expiration.ms", cfg.id_expiration_ms),
        (
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            cfg.abort_check_interval_ms,
        ),
        (
            "transaction.state.log.replication.factor",
            cfg.state_replication_factor.unwrap_or(1) as i64,
        ),
    ];
    for (key, v) in positive {
        if v < 1 {
            return Err(ConfigError::Value {
                key: key.into(),
                value: v.to_string(),
                reason: "must be at least 1".into(),
            });
        }
    }
    Ok(cfg)
}

/// The group coordinator's settings, by their Kafka names.
pub(super) fn group_config(
    raw: &BTreeMap<String, String>,
) -> Result<crate::group::GroupConfig, ConfigError> {
    let d = crate::group::GroupConfig::default();
    let cfg = crate::group::GroupConfig {
        offsets_partitions: num(raw, "offsets.topic.num.partitions", d.offsets_partitions)?,
        offsets_replication_factor: match raw.get("offsets.topic.replication.factor") {
            Some(_) => Some(num(raw, "offsets.topic.replication.factor", 3i16)?),
            None => None,
        },
        offsets_retention_ms: num(raw, "offsets.retention.minutes", 7 * 24 * 60i64)?
            .saturating_mul(60_000),
        offsets_retention_check_interval_ms: num(
            raw,
            "offsets.retention.check.interval.ms",
            d.offsets_retention_check_interval_ms,
        )?,
        initial_rebalance_delay_ms: num(
            raw,
            "group.initial.rebalance.delay.ms",
            d.initial_rebalance_delay_ms,
        )?,
        min_session_timeout_ms: num(
            raw,
            "group.min.session.timeout.ms",
            d.min_session_timeout_ms,
        )?,
        max_session_timeout_ms: num(
            raw,
            "group.max.session.timeout.ms",
            d.max_session_timeout_ms,
        )?,
        max_size: num(raw, "group.max.size", d.max_size)?,
        consumer_heartbeat_interval_ms: num(
            raw,
            "group.consumer.heartbeat.interval.ms",
            d.consumer_heartbeat_interval_ms,
        )?,
        consumer_session_timeout_ms: num(
            raw,
            "group.consumer.session.timeout.ms",
            d.consumer_session_timeout_ms,
        )?,
    };
    if cfg.offsets_replication_factor.is_some_and(|rf| rf < 1) {
        return Err(ConfigError::Value {
            key: "offsets.topic.replication.factor".into(),
            value: cfg
                .offsets_replication_factor
                .unwrap_or_default()
                .to_string(),
            reason: "must be at least 1".into(),
        });
    }
    if cfg.offsets_partitions < 1 {
        return Err(ConfigError::Value {
            key: "offsets.topic.num.partitions".into(),
            value: cfg.offsets_partitions.to_string(),
            reason: "must be at least 1".into(),
        });
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

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
