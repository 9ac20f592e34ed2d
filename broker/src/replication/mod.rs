//! Leader → follower replication: the fetchers a follower runs and the
//! client they use to reach the leader.

pub mod client;
pub mod fetcher;
pub mod session;
