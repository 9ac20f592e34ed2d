//! `KafkaCluster` and `Topic` custom resource types (filled in by the operator work).
