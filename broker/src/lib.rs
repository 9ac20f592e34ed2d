//! Skein's Kafka-compatible broker.
