//! Warnings that a stuck condition repeats many times a second (an ISR
//! change the controller keeps refusing, a full disk refusing every append)
//! are logged once per key and interval, with the number left out since:
//! one chaos run's broker log grew to 388 MB of the same refusal.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Lets one message per key through every `every`.
pub struct WarnThrottle {
    every: Duration,
    seen: Mutex<HashMap<String, (Instant, u64)>>,
}

impl WarnThrottle {
    pub fn new(every: Duration) -> Self {
        Self {
            every,
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// `Some(n)` when a message for `key` may be logged now: `n` messages
    /// for it were left out since the last one. `None`: leave it out.
    pub fn allow(&self, key: &str) -> Option<u64> {
        self.allow_at(key, Instant::now())
    }

    fn allow_at(&self, key: &str, now: Instant) -> Option<u64> {
        let mut seen = self.seen.lock().expect("throttle lock");
        if seen.len() > 10_000 {
            // Keys are partitions and error kinds; forget the quiet ones.
            let every = self.every;
            seen.retain(|_, (at, _)| now.duration_since(*at) < every);
        }
        match seen.get_mut(key) {
            Some((at, left_out)) if now.duration_since(*at) < self.every => {
                *left_out += 1;
                None
            }
            Some((at, left_out)) => {
                let n = *left_out;
                *at = now;
                *left_out = 0;
                Some(n)
            }
            None => {
                seen.insert(key.to_string(), (now, 0));
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_message_per_key_and_interval_with_the_count_left_out() {
        let t = WarnThrottle::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(t.allow_at("a", t0), Some(0));
        assert_eq!(t.allow_at("b", t0), Some(0), "keys are independent");
        for i in 1..=5 {
            assert_eq!(t.allow_at("a", t0 + Duration::from_secs(i)), None);
        }
        assert_eq!(t.allow_at("a", t0 + Duration::from_secs(10)), Some(5));
        assert_eq!(t.allow_at("a", t0 + Duration::from_secs(11)), None);
        assert_eq!(t.allow_at("a", t0 + Duration::from_secs(20)), Some(1));
    }
}
