//! Regular expressions of KIP-848 subscriptions (`SubscribedTopicRegex`),
//! read as Kafka's coordinator reads them (RE2/J, `Pattern.compile`, a
//! topic matches when the whole name does), compiled once per pattern and
//! matched against the topics only when those change.
//!
//! Dialect. RE2/J's `\w`, `\d`, `\s` and `\b` are ASCII; Rust's `regex` is
//! Unicode by default, which makes `(?:\w{1,20}){1,20}` (which Kafka
//! accepts) a program over any sane size limit. A pattern is therefore
//! compiled with Unicode off first (ASCII classes, byte matching) and only
//! when that refuses it (`\pL`, `(?i)é`) with Unicode on. Topic names are
//! ASCII (`[a-zA-Z0-9._-]`), so both readings match the same names; only
//! acceptance differs, and ASCII-first accepts what RE2/J accepts.
//!
//! Limits. RE2/J bounds each repeat count (`{n,m}` with n or m over 1000 is
//! "invalid repeat count") and accepts the inline flags `i`, `m`, `s`, `U`
//! only; both are checked here as Kafka would refuse them. RE2/J bounds
//! nothing else, so `((a{1000}){1000}){1000}` would cost Kafka a billion
//! instructions; here a compiled program over [`SIZE_LIMIT`] bytes or a
//! nesting over [`NEST_LIMIT`] is refused as INVALID_REGULAR_EXPRESSION
//! too, so one hostile heartbeat cannot take the broker's memory or CPU.
//! Known gaps: `\Q…\E`, `\C` and octal escapes, which RE2/J knows, are
//! refused; Rust-only syntax (nested classes and class set operations,
//! `\<`, `\>`) is accepted as Rust reads it.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use regex_syntax::ast::{self, Ast, Visitor};
use uuid::Uuid;

/// Topics the assignor may use: name → (topic id, partition count).
pub type Topics = BTreeMap<String, (Uuid, i32)>;

/// The largest compiled program accepted, in bytes (the `regex` crate's
/// default). Kafka has none; see the module.
pub const SIZE_LIMIT: usize = 10 << 20;

/// The deepest nesting of groups and repetitions accepted (the `regex`
/// crate's default).
pub const NEST_LIMIT: u32 = 250;

/// RE2/J's largest repeat count (`Parser.parseRepeat`).
const MAX_REPEAT: u32 = 1000;

/// A subscription's regular expression, compiled.
#[derive(Debug)]
pub struct SubscriptionRegex {
    pattern: String,
    /// `\A(?:pattern)\z`: Kafka's `matcher(topic).matches()`.
    whole: regex::bytes::Regex,
}

impl SubscriptionRegex {
    /// The pattern as the member sent it.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// Whether the whole topic name matches.
    pub fn matches(&self, topic: &str) -> bool {
        self.whole.is_match(topic.as_bytes())
    }
}

#[cfg(test)]
thread_local! {
    static COMPILATIONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many patterns this thread compiled (tests check that a heartbeat
/// with an unchanged subscription compiles nothing).
#[cfg(test)]
pub fn compilations() -> usize {
    COMPILATIONS.with(|c| c.get())
}

/// Compiles `pattern`, or says why Kafka (or a limit of ours) refuses it.
pub fn compile(pattern: &str) -> Result<Arc<SubscriptionRegex>, String> {
    #[cfg(test)]
    COMPILATIONS.with(|c| c.set(c.get() + 1));
    // Parsed alone first: only a pattern that is a whole expression may be
    // wrapped in the anchors below (`a)|(b` must not become an alternation).
    let parsed = ast::parse::ParserBuilder::new()
        .nest_limit(NEST_LIMIT)
        .build()
        .parse(pattern)
        .map_err(|e| e.kind().to_string())?;
    ast::visit(&parsed, Re2jDialect)?;
    let whole = format!(r"\A(?:{pattern})\z");
    let build = |unicode: bool| {
        regex::bytes::RegexBuilder::new(&whole)
            .unicode(unicode)
            .size_limit(SIZE_LIMIT)
            .nest_limit(NEST_LIMIT + 1)
            .build()
    };
    // Unicode classes only grow a program: one too big without them is
    // not compiled again with them.
    let whole = match build(false) {
        Err(e) if !matches!(e, regex::Error::CompiledTooBig(_)) => build(true),
        ascii => ascii,
    }
    .map_err(|e| match e {
        regex::Error::CompiledTooBig(limit) => {
            format!("the compiled expression exceeds {limit} bytes")
        }
        e => e.to_string(),
    })?;
    Ok(Arc::new(SubscriptionRegex {
        pattern: pattern.to_string(),
        whole,
    }))
}

/// Refuses what RE2/J's parser refuses and Rust's accepts.
struct Re2jDialect;

impl Visitor for Re2jDialect {
    type Output = ();
    type Err = String;

    fn finish(self) -> Result<(), String> {
        Ok(())
    }

    fn visit_pre(&mut self, ast: &Ast) -> Result<(), String> {
        let flags = match ast {
            Ast::Repetition(r) => {
                if let ast::RepetitionKind::Range(range) = &r.op.kind {
                    let n = match range {
                        ast::RepetitionRange::Exactly(n)
                        | ast::RepetitionRange::AtLeast(n)
                        | ast::RepetitionRange::Bounded(_, n) => *n,
                    };
                    if n > MAX_REPEAT {
                        return Err(format!("invalid repeat count (over {MAX_REPEAT})"));
                    }
                }
                return Ok(());
            }
            Ast::Flags(f) => &f.flags,
            Ast::Group(g) => match &g.kind {
                ast::GroupKind::NonCapturing(flags) => flags,
                _ => return Ok(()),
            },
            _ => return Ok(()),
        };
        for item in &flags.items {
            if let ast::FlagsItemKind::Flag(flag) = &item.kind {
                let known = matches!(
                    flag,
                    ast::Flag::CaseInsensitive
                        | ast::Flag::MultiLine
                        | ast::Flag::DotMatchesNewLine
                        | ast::Flag::SwapGreed
                );
                if !known {
                    return Err(format!(
                        "invalid or unsupported Perl syntax (flag {flag:?})"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The regular expressions a group's members subscribe with, each compiled
/// once, and the topics each matched the last time the topics changed.
#[derive(Debug, Clone, Default)]
pub struct ResolvedRegexes {
    entries: BTreeMap<String, Resolved>,
    /// The topics `entries` were matched against.
    against: Option<Arc<Topics>>,
}

#[derive(Debug, Clone)]
struct Resolved {
    /// `None`: a stored pattern that no longer compiles; it matches nothing.
    regex: Option<Arc<SubscriptionRegex>>,
    /// Shared: the coordinator copies a group before each heartbeat.
    topics: Arc<BTreeSet<String>>,
}

impl ResolvedRegexes {
    /// Whether `pattern` is compiled here already.
    pub fn contains(&self, pattern: &str) -> bool {
        self.entries.contains_key(pattern)
    }

    /// Whether the patterns were last matched against these topics: a
    /// pointer comparison when the coordinator hands the same topics again.
    pub fn is_fresh(&self, topics: &Arc<Topics>) -> bool {
        self.against
            .as_ref()
            .is_some_and(|a| Arc::ptr_eq(a, topics) || **a == **topics)
    }

    /// Adds a newly compiled pattern, matched at once when the others are
    /// current for `topics` (at the next [`Self::refresh`] otherwise).
    pub fn insert(&mut self, regex: Arc<SubscriptionRegex>, topics: &Arc<Topics>) {
        let fresh = self.is_fresh(topics);
        let matched = if fresh {
            Self::match_all(&regex, topics)
        } else {
            self.against = None;
            Arc::default()
        };
        self.entries.insert(
            regex.pattern().to_string(),
            Resolved {
                regex: Some(regex),
                topics: matched,
            },
        );
    }

    /// Whether [`Self::refresh`] would leave these as they are: the
    /// patterns are exactly `used` and were matched against these very
    /// topics (the same `Arc`).
    pub fn is_current<'a>(
        &self,
        used: impl Iterator<Item = &'a str> + Clone,
        topics: &Arc<Topics>,
    ) -> bool {
        self.against
            .as_ref()
            .is_some_and(|a| Arc::ptr_eq(a, topics))
            && used.clone().all(|p| self.entries.contains_key(p))
            && self.entries.keys().all(|p| used.clone().any(|u| u == p))
    }

    /// Keeps exactly the patterns in `used` and matches them again if
    /// `topics` changed. A pattern not known yet is compiled here, which
    /// happens only for members read from the log (a heartbeat's new
    /// pattern comes compiled, see [`Self::insert`]).
    pub fn refresh<'a>(&mut self, used: impl Iterator<Item = &'a str>, topics: &Arc<Topics>) {
        let used: BTreeSet<&str> = used.collect();
        if self.entries.len() != used.len() || !used.iter().all(|p| self.entries.contains_key(*p)) {
            self.entries.retain(|p, _| used.contains(p.as_str()));
            for p in used {
                if self.entries.contains_key(p) {
                    continue;
                }
                let regex = compile(p)
                    .map_err(|e| {
                        tracing::warn!(pattern = p, error = %e,
                            "a stored subscription regex does not compile; it matches nothing")
                    })
                    .ok();
                self.entries.insert(
                    p.to_string(),
                    Resolved {
                        regex,
                        topics: Arc::default(),
                    },
                );
                self.against = None;
            }
        }
        if !self.is_fresh(topics) {
            for r in self.entries.values_mut() {
                r.topics = match &r.regex {
                    Some(re) => Self::match_all(re, topics),
                    None => Arc::default(),
                };
            }
        }
        // Kept even when only equal, so the next check is a pointer one.
        self.against = Some(topics.clone());
    }

    /// These when current for `topics`, else a copy refreshed against them
    /// (for a caller that may not change the group).
    pub fn current_for<'a>(
        &'a self,
        used: impl Iterator<Item = &'a str>,
        topics: &Arc<Topics>,
    ) -> Cow<'a, ResolvedRegexes> {
        if self.is_fresh(topics) {
            return Cow::Borrowed(self);
        }
        let mut copy = self.clone();
        copy.refresh(used, topics);
        Cow::Owned(copy)
    }

    /// The topics `pattern` matched at the last refresh (none if unknown).
    pub fn matched(&self, pattern: &str) -> &BTreeSet<String> {
        static NONE: BTreeSet<String> = BTreeSet::new();
        self.entries.get(pattern).map_or(&NONE, |r| &*r.topics)
    }

    fn match_all(regex: &SubscriptionRegex, topics: &Topics) -> Arc<BTreeSet<String>> {
        Arc::new(
            topics
                .keys()
                .filter(|t| regex.matches(t))
                .cloned()
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_what_re2j_accepts_with_ascii_classes() {
        // Refused before: with Unicode classes this is over 10 MiB compiled.
        let re = compile(r"(?:\w{1,20}){1,20}").unwrap();
        assert!(re.matches("orders_2024"));
        assert!(!re.matches("orders.2024"), "\\w has no dot");
        // Unicode classes still work (RE2/J has them), through the fallback.
        assert!(compile(r"\pL+").unwrap().matches("orders"));
        assert!(compile(r"(?i)ORDERS-.*").unwrap().matches("orders-eu"));
    }

    #[test]
    fn whole_names_only() {
        let re = compile("ord.rs").unwrap();
        assert!(re.matches("orders"));
        assert!(!re.matches("orders-dlq"));
        assert!(!re.matches("my-orders"));
        // An alternation binds inside the anchors.
        let re = compile("a|ab").unwrap();
        assert!(re.matches("ab"));
    }

    #[test]
    fn refuses_what_kafka_refuses_and_hostile_patterns() {
        for bad in [
            "(",
            "a)|(b",
            "[a-",
            r"a\",
            "a{1001}",
            "(?:a{2,1001})",
            "(?x)a b",
            "(?u)a",
            "(?R)a",
        ] {
            assert!(compile(bad).is_err(), "{bad} must be refused");
        }
        assert!(compile("a{1000}").is_ok());
        let huge = compile("((a{1000}){1000}){1000}").unwrap_err();
        assert!(huge.contains("exceeds"), "{huge}");
        let deep = format!("{}a{}", "(".repeat(300), ")".repeat(300));
        assert!(compile(&deep).is_err());
    }

    #[test]
    fn resolution_is_cached_until_the_topics_change() {
        let mut r = ResolvedRegexes::default();
        let t1 = Arc::new(Topics::from([
            ("orders".to_string(), (Uuid::from_u128(1), 1)),
            ("payments".to_string(), (Uuid::from_u128(2), 1)),
        ]));
        r.insert(compile("ord.*").unwrap(), &t1);
        let before = compilations();
        r.refresh(["ord.*"].into_iter(), &t1);
        assert_eq!(r.matched("ord.*"), &BTreeSet::from(["orders".into()]));
        assert!(r.is_fresh(&t1));
        let mut t2 = (*t1).clone();
        t2.insert("ordinals".into(), (Uuid::from_u128(3), 1));
        let t2 = Arc::new(t2);
        assert!(!r.is_fresh(&t2));
        r.refresh(["ord.*"].into_iter(), &t2);
        assert_eq!(r.matched("ord.*").len(), 2);
        assert_eq!(compilations(), before, "matched again, not compiled again");
        // A pattern no member uses any more is dropped.
        r.refresh(std::iter::empty(), &t2);
        assert!(!r.contains("ord.*"));
    }
}
