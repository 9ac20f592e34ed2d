//! A coordinator's timers: a task that runs a tick every period for as
//! long as the coordinator exists (and the broker runs).

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::CoordinatorContext;

/// Calls `tick` on the coordinator every `period` (the first after one
/// period) until it is dropped or the broker stops.
pub fn every<T: Send + Sync + 'static>(
    ctx: &CoordinatorContext,
    period: Duration,
    coordinator: &Arc<T>,
    mut tick: impl FnMut(&Arc<T>) + Send + 'static,
) {
    let me: Weak<T> = Arc::downgrade(coordinator);
    ctx.spawn(async move {
        loop {
            tokio::time::sleep(period).await;
            let Some(c) = me.upgrade() else { return };
            tick(&c);
        }
    });
}
