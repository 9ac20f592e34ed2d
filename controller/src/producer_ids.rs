//! Producer-id blocks: the controller hands each broker a range of ids for
//! idempotent and transactional producers. Blocks are never reused, so the
//! start of the next block lives in the persisted [`ClusterState`].

use crate::error::ControllerError;
use crate::model::{ClusterState, ProducerIdBlock};

/// Kafka's block size (`ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`).
pub const PRODUCER_ID_BLOCK_SIZE: i32 = 1000;

/// Takes the next block from `cluster`, advancing it.
pub fn allocate_block(
    cluster: &mut ClusterState,
    size: i32,
) -> Result<ProducerIdBlock, ControllerError> {
    if size <= 0 {
        return Err(ControllerError::InvalidRequest(format!(
            "producer id block size must be positive, got {size}"
        )));
    }
    let first = cluster.next_producer_id;
    let next = first
        .checked_add(i64::from(size))
        .ok_or(ControllerError::ProducerIdsExhausted)?;
    if first < 0 {
        return Err(ControllerError::ProducerIdsExhausted);
    }
    cluster.next_producer_id = next;
    Ok(ProducerIdBlock {
        first_producer_id: first,
        size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_consecutive_and_never_overlap() {
        let mut cluster = ClusterState::default();
        let a = allocate_block(&mut cluster, PRODUCER_ID_BLOCK_SIZE).unwrap();
        let b = allocate_block(&mut cluster, PRODUCER_ID_BLOCK_SIZE).unwrap();
        assert_eq!(a.first_producer_id, 0);
        assert_eq!(a.last_producer_id(), 999);
        assert_eq!(b.first_producer_id, 1000);
        assert_eq!(cluster.next_producer_id, 2000);
    }

    #[test]
    fn exhausted_space_is_an_error_and_leaves_state_alone() {
        let mut cluster = ClusterState {
            next_producer_id: i64::MAX - 10,
            ..ClusterState::default()
        };
        assert_eq!(
            allocate_block(&mut cluster, PRODUCER_ID_BLOCK_SIZE),
            Err(ControllerError::ProducerIdsExhausted)
        );
        assert_eq!(cluster.next_producer_id, i64::MAX - 10);
    }
}
