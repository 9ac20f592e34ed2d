//! Streams groups as records of `__consumer_offsets` (keys 17, 19–23).
