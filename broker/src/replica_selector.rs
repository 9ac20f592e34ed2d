//! Fetch from the closest replica (KIP-392). With
//! `replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector`
//! a leader answers a consumer that names its rack (`client.rack`, Fetch
//! v11+) with a `preferred_read_replica` in that rack instead of records;
//! the consumer then fetches from that follower, which serves reads up to
//! the high watermark it knows. Cross-zone traffic, which cloud providers
//! bill, stays within the zone.

use std::collections::HashMap;

/// Kafka's rack-aware selector, the only one Skein (like Kafka) ships.
pub const RACK_AWARE: &str = "org.apache.kafka.common.replica.RackAwareReplicaSelector";

/// What a request needs to choose: the consumer's rack, the leader's (this
/// broker's) rack and the rack of every live broker reachable on the
/// request's listener.
#[derive(Debug)]
pub struct RackChoice {
    pub client_rack: String,
    pub leader_rack: Option<String>,
    pub racks: HashMap<i32, Option<String>>,
}

impl RackChoice {
    /// Kafka's `RackAwareReplicaSelector`: the leader when it shares the
    /// consumer's rack or no candidate does; else the candidate of that rack
    /// with the highest log end offset, then the most recently caught up.
    /// `candidates` are `(id, log end offset, ms since caught up)` of the
    /// in-sync followers holding the fetch offset. `None` means the leader.
    pub fn select(&self, candidates: &[(i32, i64, i64)]) -> Option<i32> {
        if self.client_rack.is_empty() || self.leader_rack.as_deref() == Some(&self.client_rack) {
            return None;
        }
        candidates
            .iter()
            .filter(|(id, _, _)| {
                self.racks.get(id).and_then(|r| r.as_deref()) == Some(&self.client_rack)
            })
            .max_by(|a, b| a.1.cmp(&b.1).then(b.2.cmp(&a.2)))
            .map(|c| c.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choice(client: &str, leader: Option<&str>) -> RackChoice {
        RackChoice {
            client_rack: client.into(),
            leader_rack: leader.map(str::to_string),
            racks: HashMap::from([
                (2, Some("b".into())),
                (3, Some("b".into())),
                (4, Some("c".into())),
                (5, None),
            ]),
        }
    }

    #[test]
    fn a_follower_in_the_consumers_rack_is_preferred_unless_the_leader_is_there() {
        let cands = [(2, 100, 0), (3, 120, 50), (4, 130, 0), (5, 130, 0)];
        assert_eq!(
            choice("b", Some("a")).select(&cands),
            Some(3),
            "highest LEO"
        );
        assert_eq!(choice("b", Some("b")).select(&cands), None, "leader's rack");
        assert_eq!(
            choice("d", Some("a")).select(&cands),
            None,
            "no replica there"
        );
        assert_eq!(choice("", Some("a")).select(&cands), None, "no client rack");
        assert_eq!(choice("c", None).select(&cands), Some(4));
        // Equal log ends: the most recently caught up.
        let tie = [(2, 100, 30), (3, 100, 10)];
        assert_eq!(choice("b", Some("a")).select(&tie), Some(3));
        assert_eq!(choice("b", Some("a")).select(&[]), None);
    }
}
