//! Waking what waits on a partition: producers waiting for acks=all and
//! long-polling fetches, one [`FetchWaker`] per fetch over many partitions.

use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::Partition;

/// The wake-up of one long-polling fetch over many partitions. The fetch
/// registers it with each partition ([`Partition::watch`]) and waits on it
/// once; the next change of any of them wakes it. A follower's fetch spans
/// tens of thousands of partitions: one `Notified` future per partition,
/// boxed, enabled, polled on every wake-up and dropped each round, was a
/// quarter of an idle broker's CPU at 30,000 partitions.
///
/// A fetch session's waker ([`FetchWaker::tracking`]) also records which
/// partitions changed, by the token each was watched with, so the session's
/// next round reads those and skips the rest (`fetch_session.rs`).
#[derive(Debug, Default)]
pub struct FetchWaker {
    notify: Notify,
    fired: Option<Mutex<Vec<u32>>>,
}

impl FetchWaker {
    /// A waker that records the tokens of the partitions that changed.
    pub fn tracking() -> Self {
        Self {
            notify: Notify::new(),
            fired: Some(Mutex::new(Vec::new())),
        }
    }

    /// Completes after a change of a watched partition since it was
    /// watched (at once if one came before this call).
    pub async fn woken(&self) {
        self.notify.notified().await
    }

    /// The tokens of the watched partitions that changed since the last
    /// call (each once per watch; empty for a waker that does not track).
    pub fn take_fired(&self) -> Vec<u32> {
        self.fired
            .as_ref()
            .map(|f| std::mem::take(&mut *f.lock().expect("fired lock")))
            .unwrap_or_default()
    }

    fn fire(&self, token: u32) {
        if let Some(f) = &self.fired {
            f.lock().expect("fired lock").push(token);
        }
        self.notify.notify_one();
    }
}

impl Partition {
    /// A future that completes on the next append, high-watermark move or
    /// role change; call `enable()` on it before re-checking so no change
    /// is missed in between.
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// Wakes `waker` on this partition's next change (once; watch again
    /// after it fired), which records `token` if it tracks. Watching twice
    /// is one registration, with the later token.
    pub fn watch(&self, waker: &Arc<FetchWaker>, token: u32) {
        let mut watchers = self.watchers.lock().expect("watchers lock");
        if let Some(w) = watchers
            .iter_mut()
            .find(|(w, _)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(waker)))
        {
            w.1 = token;
            return;
        }
        // Fetches that returned since leave their dead entries behind.
        watchers.retain(|(w, _)| w.strong_count() > 0);
        watchers.push((Arc::downgrade(waker), token));
    }

    /// Follower `replica_id`'s session (its `pulse`) no longer fetches this
    /// partition: its rounds from now on are not fetches of it, so its
    /// progress stops following them (see [`FollowerProgress`]).
    pub fn leave_pulse(&self, replica_id: i32, pulse: &Arc<AtomicI64>) {
        let mut st = self.state();
        if let Some(p) = st.followers.get_mut(&replica_id) {
            if p.pulse.as_ref().is_some_and(|q| Arc::ptr_eq(q, pulse)) {
                p.leave_pulse();
            }
        }
    }

    /// Wakes whatever waits on this partition: a change that none of the
    /// paths here saw (retention moved the log start offset).
    pub fn touch(&self) {
        self.notify_changed();
    }

    /// After an append, a high-watermark move or a role change: wakes the
    /// producers and fetches waiting on this partition.
    pub(super) fn notify_changed(&self) {
        self.changed.notify_waiters();
        let watchers = std::mem::take(&mut *self.watchers.lock().expect("watchers lock"));
        for (w, token) in watchers {
            if let Some(w) = w.upgrade() {
                w.fire(token);
            }
        }
    }
}
