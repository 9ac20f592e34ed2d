//! One broker-wide budget for request bytes in flight (Kafka's
//! `queued.max.request.bytes` memory pool).
//!
//! A frame's size is the peer's claim. Each connection's own limits
//! (`socket.request.max.bytes`, `sasl.server.max.receive.size` before
//! authentication) bound one request, not the sum over thousands of
//! connections: without a shared budget, enough connections each sending a
//! large request can take the broker's memory. A connection reserves its
//! whole frame from the pool before reading the body (all or nothing, as
//! Kafka's pool does, so two half-read frames never wait on each other) and
//! gives it back once the request is answered. While the pool is spent, the
//! connections that want more wait: they read nothing more, so the memory
//! they hold is what was granted.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The pool; `None` inside when unbounded.
pub struct RequestMemoryPool {
    budget: Option<(Arc<Semaphore>, usize)>,
}

/// Bytes granted to one frame, given back when dropped.
pub struct Grant {
    _permit: Option<OwnedSemaphorePermit>,
}

impl RequestMemoryPool {
    /// A pool of `bytes` (`None`: unbounded). The broker's configuration
    /// makes sure it can hold the largest request.
    pub fn new(bytes: Option<usize>) -> Self {
        let budget = bytes.map(|b| {
            let b = b.min(Semaphore::MAX_PERMITS);
            (Arc::new(Semaphore::new(b)), b)
        });
        RequestMemoryPool { budget }
    }

    /// Waits until `size` bytes are free, and takes them.
    pub async fn reserve(&self, size: usize) -> Grant {
        let Some((sem, total)) = &self.budget else {
            return Grant { _permit: None };
        };
        // A frame larger than the pool (not possible with a validated
        // configuration) takes the whole pool rather than waiting forever.
        let n = size.min(*total).min(u32::MAX as usize) as u32;
        let permit = sem
            .clone()
            .acquire_many_owned(n)
            .await
            .expect("the request memory pool is never closed");
        Grant {
            _permit: Some(permit),
        }
    }

    /// Bytes free now (`None`: unbounded), for metrics and tests.
    pub fn available(&self) -> Option<usize> {
        self.budget.as_ref().map(|(s, _)| s.available_permits())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_spent_pool_holds_the_next_frame_until_bytes_come_back() {
        let pool = Arc::new(RequestMemoryPool::new(Some(1000)));
        let first = pool.reserve(800).await;
        assert_eq!(pool.available(), Some(200));
        let p = pool.clone();
        let waiting = tokio::spawn(async move { p.reserve(300).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "300 bytes are not free yet");
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("granted once the first frame is answered")
            .unwrap();
        assert_eq!(pool.available(), Some(700));
        drop(second);
        assert_eq!(pool.available(), Some(1000));
    }

    #[tokio::test]
    async fn an_unbounded_pool_never_waits() {
        let pool = RequestMemoryPool::new(None);
        let _a = pool.reserve(usize::MAX).await;
        let _b = pool.reserve(usize::MAX).await;
        assert_eq!(pool.available(), None);
    }
}
