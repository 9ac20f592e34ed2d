//! Timing of the controller's events, and giving memory back after slow
//! ones.

use std::time::Duration;

/// What `ControllerService::carry_out` needs to know of the event.
#[derive(Default)]
pub(super) struct EventKind {
    pub(super) name: &'static str,
    /// An election pass (counted as preferred elections).
    pub(super) rebalancing: bool,
    /// A topic whose configs changed (brokers re-read them).
    pub(super) config_topic: Option<String>,
    /// Broker configs changed (brokers re-read them).
    pub(super) broker_configs: bool,
}

/// Where one event's time went, logged when it was slow: at 100,000
/// partitions a broker loss is one event that changes every partition, and
/// failover time is mostly this.
pub(super) struct EventTiming {
    started: std::time::Instant,
    last: std::time::Instant,
    phases: Vec<(&'static str, Duration)>,
}

impl EventTiming {
    /// Events at least this slow are logged with their phases.
    const SLOW: Duration = Duration::from_millis(200);

    pub(super) fn start() -> Self {
        let now = std::time::Instant::now();
        EventTiming {
            started: now,
            last: now,
            phases: Vec::new(),
        }
    }

    /// Ends the phase `name`.
    pub(super) fn lap(&mut self, name: &'static str) {
        let now = std::time::Instant::now();
        self.phases.push((name, now - self.last));
        self.last = now;
    }

    /// Logs the event if it was slow; whether it was.
    pub(super) fn report(&self, event: &'static str, records: usize, instructions: usize) -> bool {
        let total = self.started.elapsed();
        if total < Self::SLOW {
            return false;
        }
        let phases = self
            .phases
            .iter()
            .map(|(n, d)| format!("{n} {} ms", d.as_millis()))
            .collect::<Vec<_>>()
            .join(", ");
        tracing::info!(
            event,
            ms = total.as_millis() as u64,
            records,
            instructions,
            phases,
            "slow controller event"
        );
        true
    }
}

/// Hands the allocator's free memory back to the system. A slow event
/// (a broker lost at 100,000 partitions) allocates tens of MiB for a
/// moment on whichever blocking-pool thread ran it, and glibc keeps what
/// each thread's arena freed: the controller grew to 400 MiB after a few
/// failovers. Capping the arenas instead made the threads contend for
/// them and the events slower. No effect with other C libraries.
pub(super) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages; no memory is touched.
    unsafe {
        libc::malloc_trim(0);
    }
}
