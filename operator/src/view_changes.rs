//! What wakes the KafkaCluster reconciler besides its own objects: a
//! change of a cluster's controller view that the reconcile acts on.
//!
//! The reconciler is woken by the KafkaCluster and the objects it owns
//! (the StatefulSet's status among them). But a broker pod turns Ready when
//! its Kafka port opens, and the controller's session with it comes up a
//! moment later: a reconcile woken by the last Ready pod may still see that
//! broker gone, and nothing else would wake it before its long requeue
//! (every broker ready: 5 minutes). So a scale-up would wait minutes to
//! fill its new brokers, and a rolling restart to go on. Each cluster's
//! controller therefore reports the changes of its view's [`Shape`]: which
//! brokers are alive, and whether anything is moving, under-replicated or
//! offline.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::Stream;
use skein_controller::{BrokerView, ClusterView, ControllerService};
use tokio::sync::watch;

/// What of a view the KafkaCluster reconcile decides on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Shape {
    alive: BTreeSet<i32>,
    storage_lost: BTreeSet<i32>,
    moving: bool,
    under_replicated: bool,
    offline: bool,
}

impl Shape {
    pub fn of(view: &ClusterView) -> Self {
        let health = view.partition_health();
        let ids = |pick: fn(&BrokerView) -> bool| {
            view.brokers
                .values()
                .filter(|b| pick(b))
                .map(|b| b.id)
                .collect()
        };
        Self {
            alive: ids(|b| b.alive),
            storage_lost: ids(|b| b.storage_lost),
            moving: health.reassigning > 0,
            under_replicated: health.under_replicated > 0,
            offline: health.offline > 0,
        }
    }
}

/// Bumps `changes` whenever the shape of `controller`'s view changes (the
/// task ends with the cluster's controller).
pub async fn report(controller: Arc<ControllerService>, changes: watch::Sender<u64>) {
    let mut published = controller.subscribe();
    let mut last = Shape::of(&controller.view());
    while published.changed().await.is_ok() {
        let now = Shape::of(&controller.view());
        if now != last {
            last = now;
            changes.send_modify(|n| *n = n.wrapping_add(1));
        }
    }
}

/// One item per bump of `changes` (bumps while the item waits merge into it).
pub fn stream(changes: watch::Receiver<u64>) -> impl Stream<Item = ()> + Send + 'static {
    futures::stream::unfold(changes, |mut rx| async move {
        rx.changed().await.ok().map(|()| ((), rx))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn view(alive: &[i32], gone: &[i32]) -> ClusterView {
        let mut v = ClusterView::default();
        for (id, up) in alive
            .iter()
            .map(|b| (*b, true))
            .chain(gone.iter().map(|b| (*b, false)))
        {
            v.brokers.insert(
                id,
                BrokerView {
                    id,
                    host: format!("b{id}"),
                    port: 9092,
                    rack: None,
                    alive: up,
                    storage_lost: false,
                    storage_losses: 0,
                    endpoints: Vec::new(),
                    broker_epoch: 1,
                    in_controlled_shutdown: false,
                    software_version: None,
                },
            );
        }
        v
    }

    #[test]
    fn a_broker_coming_up_changes_the_shape_and_the_same_brokers_do_not() {
        let four = Shape::of(&view(&[0, 1, 2, 3], &[4]));
        assert_ne!(four, Shape::of(&view(&[0, 1, 2, 3, 4], &[])));
        assert_eq!(four, Shape::of(&view(&[0, 1, 2, 3], &[4])));
    }

    #[tokio::test]
    async fn the_stream_yields_once_per_burst_of_bumps() {
        let (tx, rx) = watch::channel(0u64);
        let mut s = Box::pin(stream(rx));
        tx.send_modify(|n| *n += 1);
        tx.send_modify(|n| *n += 1);
        assert_eq!(s.next().await, Some(()));
        let none_yet = tokio::time::timeout(std::time::Duration::from_millis(50), s.next()).await;
        assert!(none_yet.is_err(), "no bump since the last item");
        tx.send_modify(|n| *n += 1);
        assert_eq!(s.next().await, Some(()));
        drop(tx);
        assert_eq!(s.next().await, None);
    }
}
