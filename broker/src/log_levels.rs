//! Log levels changed at run time: Kafka's BROKER_LOGGER config resources
//! (`kafka-configs --entity-type broker-loggers --entity-name <id>`).
//!
//! Kafka's loggers are log4j's; Skein's are `tracing` targets. `root` is
//! the default level (`SKEIN_LOG`'s bare level, `info` unset); the other
//! loggers are Skein's crates (`skein_broker`, `skein_storage`, …) and any
//! module under them (`skein_broker::replication`). A level set with
//! IncrementalAlterConfigs (Kafka's TRACE, DEBUG, INFO, WARN, ERROR or
//! FATAL, which is ERROR here) applies at once and lasts until the broker
//! stops, as in Kafka; DELETE returns a logger to what `SKEIN_LOG` says.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

/// Kafka's `LogLevelConfig.VALID_LOG_LEVELS`, sorted as its messages list them.
pub const LEVELS: [&str; 6] = ["DEBUG", "ERROR", "FATAL", "INFO", "TRACE", "WARN"];
/// The loggers listed besides `root`: Skein's crates.
pub const CRATES: [&str; 4] = [
    "skein_broker",
    "skein_controller",
    "skein_storage",
    "skein_tiered",
];

/// Installs a new filter from directives (`info,skein_storage=debug`).
pub type Reload = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

pub struct LogLevels {
    /// `SKEIN_LOG` (or `info`), as directives.
    base: String,
    /// Levels set at run time: logger → Kafka level name.
    overrides: Mutex<BTreeMap<String, String>>,
    /// Installs a new filter (`None`: no subscriber to change, as in tests).
    reload: Option<Reload>,
}

static LEVELS_STATE: OnceLock<LogLevels> = OnceLock::new();

/// Called once by `main` with the subscriber's reload handle.
pub fn install(base: &str, reload: Reload) {
    let _ = LEVELS_STATE.set(LogLevels {
        base: base.to_string(),
        overrides: Mutex::new(BTreeMap::new()),
        reload: Some(reload),
    });
}

/// The process's log levels.
pub fn get() -> &'static LogLevels {
    LEVELS_STATE.get_or_init(|| LogLevels {
        base: std::env::var("SKEIN_LOG").unwrap_or_else(|_| "info".into()),
        overrides: Mutex::new(BTreeMap::new()),
        reload: None,
    })
}

fn tracing_level(kafka: &str) -> &'static str {
    match kafka {
        "TRACE" => "trace",
        "DEBUG" => "debug",
        "WARN" => "warn",
        "ERROR" | "FATAL" => "error",
        _ => "info",
    }
}

/// `SKEIN_LOG`'s directives as (target, level): `None` for the bare level.
fn directives(base: &str) -> Vec<(Option<String>, String)> {
    base.split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| match d.split_once('=') {
            Some((t, l)) => (Some(t.trim().to_string()), l.trim().to_ascii_uppercase()),
            None => (None, d.to_ascii_uppercase()),
        })
        .collect()
}

impl LogLevels {
    /// Whether `name` is a logger: `root`, a crate of Skein's or a module
    /// under one (Kafka's "Logger X does not exist!" otherwise).
    pub fn exists(&self, name: &str) -> bool {
        // A module path: identifiers joined by `::`.
        let path = name.split("::").all(|seg| {
            seg.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && seg.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        name == "root"
            || (path
                && CRATES.iter().any(|c| {
                    name == *c || name.strip_prefix(c).is_some_and(|r| r.starts_with("::"))
                }))
    }

    fn base_level(&self, name: &str) -> String {
        let ds = directives(&self.base);
        let root = ds
            .iter()
            .rev()
            .find(|(t, _)| t.is_none())
            .map_or("INFO".to_string(), |(_, l)| l.clone());
        if name == "root" {
            return root;
        }
        // The most specific directive naming the logger or a parent of it.
        ds.iter()
            .filter_map(|(t, l)| t.as_ref().map(|t| (t, l)))
            .filter(|(t, _)| name == t.as_str() || name.starts_with(&format!("{t}::")))
            .max_by_key(|(t, _)| t.len())
            .map_or(root, |(_, l)| l.clone())
    }

    /// Every logger with its level: `root`, Skein's crates, and the loggers
    /// set at run time.
    pub fn loggers(&self) -> Vec<(String, String)> {
        let overrides = self.overrides.lock().unwrap().clone();
        let mut names: Vec<String> = std::iter::once("root".to_string())
            .chain(CRATES.iter().map(|c| c.to_string()))
            .chain(overrides.keys().cloned())
            .collect();
        names.sort_by_key(|n| (n != "root", n.clone()));
        names.dedup();
        names
            .into_iter()
            .map(|n| {
                let level = overrides
                    .get(&n)
                    .cloned()
                    .unwrap_or_else(|| self.base_level(&n));
                (n, level)
            })
            .collect()
    }

    fn apply(&self, overrides: &BTreeMap<String, String>) -> Result<(), String> {
        let Some(reload) = &self.reload else {
            return Ok(());
        };
        let root = overrides
            .get("root")
            .map(|l| tracing_level(l).to_string())
            .unwrap_or_else(|| tracing_level(&self.base_level("root")).to_string());
        let mut ds = vec![root];
        for (t, l) in directives(&self.base) {
            if let Some(t) = t.filter(|t| !overrides.contains_key(t)) {
                ds.push(format!("{t}={}", tracing_level(&l)));
            }
        }
        for (t, l) in overrides.iter().filter(|(t, _)| *t != "root") {
            ds.push(format!("{t}={}", tracing_level(l)));
        }
        reload(&ds.join(","))
    }

    /// Sets a logger's level (a Kafka level name, checked by the caller).
    pub fn set(&self, name: &str, level: &str) -> Result<(), String> {
        let mut overrides = self.overrides.lock().unwrap();
        overrides.insert(name.to_string(), level.to_string());
        self.apply(&overrides)
    }

    /// Returns a logger to its level from `SKEIN_LOG`.
    pub fn unset(&self, name: &str) -> Result<(), String> {
        let mut overrides = self.overrides.lock().unwrap();
        overrides.remove(name);
        self.apply(&overrides)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn levels(base: &str) -> (LogLevels, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let l = LogLevels {
            base: base.into(),
            overrides: Mutex::new(BTreeMap::new()),
            reload: Some(Box::new(move |d: &str| {
                s.lock().unwrap().push(d.to_string());
                Ok(())
            })),
        };
        (l, seen)
    }

    #[test]
    fn loggers_their_levels_and_the_filter_they_make() {
        let (l, seen) = levels("warn,skein_storage=debug");
        let all: BTreeMap<_, _> = l.loggers().into_iter().collect();
        assert_eq!(all["root"], "WARN");
        assert_eq!(all["skein_storage"], "DEBUG");
        assert_eq!(all["skein_broker"], "WARN");
        assert!(l.exists("skein_broker::replication"));
        assert!(!l.exists("skein_brokerx") && !l.exists("kafka.server.ReplicaManager"));
        for bad in [
            "skein_broker::[",
            "skein_broker::",
            "skein_broker::a=b",
            "skein_broker::1x",
        ] {
            assert!(!l.exists(bad), "{bad}");
        }
        l.set("skein_broker::replication", "TRACE").unwrap();
        l.set("root", "FATAL").unwrap();
        assert_eq!(
            seen.lock().unwrap().last().unwrap(),
            "error,skein_storage=debug,skein_broker::replication=trace"
        );
        let all: BTreeMap<_, _> = l.loggers().into_iter().collect();
        assert_eq!(all["skein_broker::replication"], "TRACE");
        assert_eq!(all["root"], "FATAL");
        l.unset("root").unwrap();
        assert_eq!(
            seen.lock().unwrap().last().unwrap(),
            "warn,skein_storage=debug,skein_broker::replication=trace"
        );
    }
}
