//! Which partition of a coordinator's topic holds a key (a group id, a
//! transactional id): chosen exactly as Kafka does
//! (`Utils.abs(key.hashCode) % partitions`), so a key lands on the same
//! partition number on Skein and on Kafka.

/// Java's `String.hashCode` (UTF-16 code units, wrapping arithmetic).
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32))
}

/// The partition, of `partitions`, that holds `key`.
pub fn partition_for(key: &str, partitions: i32) -> i32 {
    let h = java_string_hash(key);
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_matches_kafka() {
        // Java: "my-group".hashCode() == -1906497762, abs % 50 == 12.
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("my-group"), -1_906_497_762);
        assert_eq!(partition_for("my-group", 50), 12);
        // A hash of i32::MIN maps to 0 (Kafka's Utils.abs), not to a negative.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        assert_eq!(partition_for("console-consumer-12345", 50), 6);
    }
}
