//! Skein's partition log (Kafka's `UnifiedLog`): a directory of segments named
//! by their 20-digit base offset, each a `.log` of record batches with a sparse
//! `.index` and a `.timeindex`.
