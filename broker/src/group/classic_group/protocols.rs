//! Which protocol a classic group's members share: the vote that picks
//! one, whether a joining member fits, and the topics a `consumer`
//! group's members subscribed to.

use std::collections::BTreeMap;

use super::{ClassicGroup, JoinRequest};
use crate::group::member::ClassicMember;

impl ClassicGroup {
    /// Protocols every member supports, in the first member's order.
    fn candidate_protocols(&self) -> Vec<String> {
        let mut it = self.members.values();
        let Some(first) = it.next() else {
            return Vec::new();
        };
        let rest: Vec<&ClassicMember> = it.collect();
        first
            .protocols
            .iter()
            .map(|(n, _)| n.clone())
            .filter(|n| rest.iter().all(|m| m.supports(n)))
            .collect()
    }

    /// The protocol with most first-choice votes among the candidates (ties:
    /// the name sorting first, so the choice is deterministic).
    pub fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(v) = m.vote(&candidates) {
                *votes.entry(v).or_default() += 1;
            }
        }
        let best = votes.values().copied().max()?;
        votes
            .into_iter()
            .find(|(_, n)| *n == best)
            .map(|(p, _)| p.to_string())
    }

    /// Whether a (re)joining member with these protocols fits the group.
    pub(super) fn accepts_protocols(&self, req: &JoinRequest, member_id: Option<&str>) -> bool {
        if req.protocol_type.is_empty() || req.protocols.is_empty() {
            return false;
        }
        let others: Vec<&ClassicMember> = self
            .members
            .values()
            .filter(|m| Some(m.id.as_str()) != member_id)
            .collect();
        if others.is_empty() {
            return true;
        }
        if self.protocol_type.as_deref() != Some(req.protocol_type.as_str()) {
            return false;
        }
        req.protocols
            .iter()
            .any(|(n, _)| others.iter().all(|m| m.supports(n)))
    }

    /// Topics the members subscribed to, when the protocol is `consumer`
    /// and every subscription decodes; `None` if unknown.
    pub fn subscribed_topics(&self) -> Option<std::collections::BTreeSet<String>> {
        use kafka_protocol::messages::ConsumerProtocolSubscription;
        use kafka_protocol::protocol::Decodable;
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        let protocol = self.protocol.as_deref()?;
        let mut topics = std::collections::BTreeSet::new();
        for m in self.members.values() {
            let mut buf = m.metadata(protocol);
            if buf.len() < 2 {
                return None;
            }
            let version = i16::from_be_bytes([buf[0], buf[1]]);
            bytes::Buf::advance(&mut buf, 2);
            let sub = ConsumerProtocolSubscription::decode(&mut buf, version.min(3)).ok()?;
            topics.extend(sub.topics.iter().map(|t| t.to_string()));
        }
        Some(topics)
    }
}
