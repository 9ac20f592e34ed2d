//! DescribeConfigs and IncrementalAlterConfigs on BROKER_LOGGER resources:
//! this broker's log levels (`crate::log_levels`), with Kafka 4.4's checks
//! and messages (`RuntimeLoggerManager`, `ConfigHelper`).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResourceResult;

use super::broker_configs::{APPEND, DELETE, SET, SUBTRACT};
use super::strb;
use crate::broker::Broker;
use crate::error::ApiError;
use crate::log_levels::{self, LEVELS};

/// Kafka's `ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG`.
const SOURCE_BROKER_LOGGER: i8 = 6;

fn invalid_request(msg: String) -> ApiError {
    ApiError::new(ResponseError::InvalidRequest, msg)
}

/// Every logger and its level, for this broker only.
pub fn describe(
    broker: &Broker,
    name: &str,
    wanted: &dyn Fn(&str) -> bool,
    _include_synonyms: bool,
    _include_documentation: bool,
) -> Result<Vec<DescribeConfigsResourceResult>, ApiError> {
    if name.is_empty() {
        return Err(invalid_request("Broker id must not be empty".into()));
    }
    let id: i32 = name
        .parse()
        .map_err(|_| invalid_request(format!("Broker id must be an integer, but it is: {name}")))?;
    let me = broker.config.node_id;
    if id != me {
        return Err(invalid_request(format!(
            "Unexpected broker id, expected {me} but received {name}"
        )));
    }
    Ok(log_levels::get()
        .loggers()
        .into_iter()
        .filter(|(n, _)| wanted(n))
        .map(|(n, level)| {
            let mut c = DescribeConfigsResourceResult::default();
            c.name = strb(n);
            c.value = Some(strb(level));
            c.config_source = SOURCE_BROKER_LOGGER;
            c
        })
        .collect())
}

/// Sets (SET) or unsets (DELETE) log levels of this broker; every change is
/// checked before any applies.
pub fn incremental_alter(
    broker: &Broker,
    name: &str,
    ops: Vec<(String, i8, Option<String>)>,
    validate_only: bool,
) -> Result<(), ApiError> {
    let id: i32 = name
        .parse()
        .map_err(|_| invalid_request(format!("Node id must be an integer, but it is: {name}")))?;
    let me = broker.config.node_id;
    if id != me {
        return Err(invalid_request(format!(
            "Unexpected node id. Expected {me}, but received {id}"
        )));
    }
    let levels = log_levels::get();
    let missing = |logger: &str| {
        ApiError::new(
            ResponseError::InvalidConfig,
            format!("Logger {logger} does not exist!"),
        )
    };
    for (logger, op, value) in &ops {
        match *op {
            SET => {
                if !levels.exists(logger) {
                    return Err(missing(logger));
                }
                let level = value.as_deref().unwrap_or("");
                if !LEVELS.contains(&level) {
                    return Err(ApiError::new(
                        ResponseError::InvalidConfig,
                        format!(
                            "Cannot set the log level of {logger} to {level} as it is not a supported log level. Valid log levels are {}",
                            LEVELS.join(", ")
                        ),
                    ));
                }
            }
            DELETE => {
                if !levels.exists(logger) {
                    return Err(missing(logger));
                }
                if logger == "root" {
                    return Err(invalid_request(
                        "Removing the log level of the root logger is not allowed".into(),
                    ));
                }
            }
            APPEND | SUBTRACT => {
                let what = if *op == APPEND { "APPEND" } else { "SUBTRACT" };
                return Err(invalid_request(format!(
                    "{what} operation is not allowed for the BROKER_LOGGER resource"
                )));
            }
            other => {
                return Err(invalid_request(format!(
                    "Unknown operation type {other} is not allowed for the BROKER_LOGGER resource"
                )))
            }
        }
    }
    if validate_only {
        return Ok(());
    }
    for (logger, op, value) in ops {
        let applied = match op {
            SET => levels.set(&logger, value.as_deref().unwrap_or("INFO")),
            _ => levels.unset(&logger),
        };
        match applied {
            Ok(()) => tracing::warn!(logger, level = ?value, "log level changed"),
            Err(why) => tracing::error!(logger, %why, "failed to change the log level"),
        }
    }
    Ok(())
}
