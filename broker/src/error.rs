//! The broker's error type, mapped once to the Kafka error code a client sees.

use kafka_protocol::error::ResponseError;
use skein_storage::StorageError;

/// An error answered to a client as a Kafka error code plus an optional message.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code:?}: {message}")]
pub struct ApiError {
    pub code: ResponseError,
    pub message: String,
    /// KIP-467: the refused records of a produced batch, by index.
    pub record_errors: Vec<skein_storage::RecordError>,
}

impl ApiError {
    pub fn new(code: ResponseError, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            record_errors: Vec::new(),
        }
    }

    /// The wire error code.
    pub fn code(&self) -> i16 {
        self.code.code()
    }

    /// The message, as the optional string most responses carry.
    pub fn message(&self) -> Option<kafka_protocol::protocol::StrBytes> {
        Some(kafka_protocol::protocol::StrBytes::from_string(
            self.message.clone(),
        ))
    }
}

/// The controller's refusals and control-plane failures, by the Kafka code
/// each stands for (mapped here, at the broker's edge).
impl From<skein_controller::ControlPlaneError> for ApiError {
    fn from(e: skein_controller::ControlPlaneError) -> Self {
        let code = ResponseError::try_from_code(e.kafka_code())
            .unwrap_or(ResponseError::UnknownServerError);
        ApiError::new(code, e.to_string())
    }
}

impl From<skein_controller::ControllerError> for ApiError {
    fn from(e: skein_controller::ControllerError) -> Self {
        skein_controller::ControlPlaneError::Controller(e).into()
    }
}

impl From<StorageError> for ApiError {
    fn from(e: StorageError) -> Self {
        let code = match &e {
            StorageError::CorruptRecord(_) => ResponseError::CorruptMessage,
            StorageError::InvalidRecord(_) => ResponseError::InvalidRecord,
            StorageError::RejectedRecords { timestamp, errors } => {
                let code = if *timestamp {
                    ResponseError::InvalidTimestamp
                } else {
                    ResponseError::InvalidRecord
                };
                let mut err = ApiError::new(code, e.to_string());
                err.record_errors = errors.clone();
                return err;
            }
            StorageError::UnsupportedMagic(_) => ResponseError::UnsupportedForMessageFormat,
            StorageError::MessageTooLarge { .. } => ResponseError::MessageTooLarge,
            StorageError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
            StorageError::OffsetMovedToTieredStorage { .. } => {
                ResponseError::OffsetMovedToTieredStorage
            }
            StorageError::OutOfOrderSequence(_) => ResponseError::OutOfOrderSequenceNumber,
            StorageError::InvalidProducerEpoch(_) => ResponseError::InvalidProducerEpoch,
            StorageError::InvalidTxnState(_) => ResponseError::InvalidTxnState,
            _ => ResponseError::KafkaStorageError,
        };
        ApiError::new(code, e.to_string())
    }
}
