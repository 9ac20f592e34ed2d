//! A streams group's topology checked against the cluster (Kafka 4.4's
//! `InternalTopicManager.configureTopics`; docs/design/streams-groups-kafka-4.4.md,
//! section 5.3): missing source topics, the partition counts of
//! repartition and changelog topics, copartitioning, and the internal
//! topics the broker must create before the group can be assigned.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

pub use super::model::{Configured, ConfiguredSubtopology, CreatableTopic};
use super::model::{Subtopology, TopicInfo, Topology};
use crate::group::subscription_regex::Topics;

/// Heartbeat status codes (`StreamsGroupHeartbeatResponse.Status`).
pub const STALE_TOPOLOGY: i8 = 0;
pub const MISSING_SOURCE_TOPICS: i8 = 1;
pub const INCORRECTLY_PARTITIONED_TOPICS: i8 = 2;
pub const MISSING_INTERNAL_TOPICS: i8 = 3;
pub const SHUTDOWN_APPLICATION: i8 = 4;
pub const ASSIGNMENT_DELAYED: i8 = 5;
pub const MISSING_CLIENT_TAGS: i8 = 6;

/// A topology that can never run: STREAMS_INVALID_TOPOLOGY with this
/// message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidTopology(pub String);

/// Checks `topology` against the cluster's `topics` (name → id,
/// partitions).
///
/// Kafka keeps the subtopologies, each copartition group and the required
/// topics in `HashMap`s / `HashSet`s; where their iteration order changes
/// a result (which sink count a repartition pass sees first, which count
/// wins when a topic is written twice) or picks which error is reported,
/// that order is reproduced ([`java_hash_order`]). Cases Kafka answers
/// with UNKNOWN_SERVER_ERROR (an `IllegalStateException` or an index out
/// of bounds: duplicate subtopology ids, duplicate internal topics or
/// config keys within a subtopology, copartition indexes out of range, a
/// non-positive task count) cannot be told apart here and fail as
/// [`InvalidTopology`] with a message saying what is wrong.
pub fn configure(topology: &Topology, topics: &Topics) -> Result<Configured, InvalidTopology> {
    // Before Kafka's try block: the subtopology map and the copartition
    // groups resolved to topic names.
    let subs = subtopologies_in_java_order(topology).map_err(InvalidTopology)?;
    let groups = subs
        .iter()
        .map(|s| copartition_groups(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(InvalidTopology)?;
    match configure_topics(topology, &subs, &groups, topics) {
        Ok(configured) => Ok(configured),
        Err(Stop::Problem(code, message)) => Ok(Configured {
            topology_epoch: topology.epoch,
            subtopologies: BTreeMap::new(),
            problem: Some((code, message)),
            to_create: Vec::new(),
        }),
        Err(Stop::Invalid(message)) => Err(InvalidTopology(message)),
    }
}

/// A stable digest of the required topics that exist (name, id, partition
/// count): a change means the topology must be configured again.
///
/// FNV-1a 64 over, per existing required topic in name order, the name's
/// length (u32, big-endian) and bytes, the 16 id bytes and the partition
/// count (i32, big-endian). 0 when no required topic exists (a digest that
/// happens to be 0 becomes 1, so "none" stays distinct).
pub fn metadata_hash(topology: &Topology, topics: &Topics) -> i64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(PRIME);
        }
    };
    let mut any = false;
    for name in topology.required_topics() {
        if let Some((id, partitions)) = topics.get(name) {
            any = true;
            feed(&(name.len() as u32).to_be_bytes());
            feed(name.as_bytes());
            feed(id.as_bytes());
            feed(&partitions.to_be_bytes());
        }
    }
    match (any, hash as i64) {
        (false, _) => 0,
        (true, 0) => 1,
        (true, h) => h,
    }
}

/// Why configuring stopped: a topic problem (not ready, status code and
/// message) or an invalid topology.
enum Stop {
    Problem(i8, String),
    Invalid(String),
}

type Step<T> = Result<T, Stop>;

fn incorrectly_partitioned(message: String) -> Stop {
    Stop::Problem(INCORRECTLY_PARTITIONED_TOPICS, message)
}

/// Partition counts: the cluster's for existing topics, else the ones
/// decided so far (Kafka's `topicPartitionCountProvider`).
struct Counts<'a> {
    topics: &'a Topics,
    decided: HashMap<&'a str, i32>,
}

impl Counts<'_> {
    fn get(&self, topic: &str) -> Option<i32> {
        match self.topics.get(topic) {
            Some((_, partitions)) => Some(*partitions),
            None => self.decided.get(topic).copied(),
        }
    }

    /// A count that earlier steps guarantee; Kafka throws an
    /// `IllegalStateException` with `message` otherwise.
    fn expect(&self, topic: &str, message: &str) -> Step<i32> {
        self.get(topic)
            .ok_or_else(|| Stop::Invalid(format!("{message}{topic}")))
    }
}

/// Sections 5.3a–g after the subtopology map and copartition groups are
/// built (Kafka's try block).
fn configure_topics<'a>(
    topology: &'a Topology,
    subs: &[&'a Subtopology],
    groups: &[Vec<Vec<&'a str>>],
    topics: &'a Topics,
) -> Step<Configured> {
    missing_source_topics(topology, topics)?;
    let mut counts = Counts {
        topics,
        decided: repartition_counts(subs, topics)?,
    };
    enforce_copartitioning(subs, groups, &mut counts)?;
    let changelogs = changelog_counts(subs, &counts)?;
    counts.decided.extend(changelogs);

    let mut subtopologies = BTreeMap::new();
    for s in subs {
        subtopologies.insert(s.id.clone(), configured_subtopology(s, &counts)?);
    }
    let to_create = missing_internal_topics(&subtopologies, subs, topics)?;
    let problem = if to_create.is_empty() {
        None
    } else {
        // Kafka lists the names in its HashMap's order; sorted here.
        let names: Vec<&str> = to_create.iter().map(|t| t.name.as_str()).collect();
        Some((
            MISSING_INTERNAL_TOPICS,
            format!("Internal topics are missing: {}", summarize_topics(&names)),
        ))
    };
    Ok(Configured {
        topology_epoch: topology.epoch,
        subtopologies,
        problem,
        to_create,
    })
}

/// 5.3a: every source topic must exist.
fn missing_source_topics(topology: &Topology, topics: &Topics) -> Step<()> {
    let missing: BTreeSet<&str> = topology
        .subtopologies
        .iter()
        .flat_map(|s| &s.source_topics)
        .filter(|t| !topics.contains_key(t.as_str()))
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let missing: Vec<&str> = missing.into_iter().collect();
    Err(Stop::Problem(
        MISSING_SOURCE_TOPICS,
        format!("Source topics {} are missing.", summarize_topics(&missing)),
    ))
}

/// 5.3b (`RepartitionTopics.setup`): the counts of repartition topics,
/// fixed ones first, then every sink from what its writer reads, pass
/// after pass. A sink that no subtopology reads gets a count too (Kafka
/// computes it and then ignores it: it is neither required nor created).
fn repartition_counts<'a>(
    subs: &[&'a Subtopology],
    topics: &Topics,
) -> Step<HashMap<&'a str, i32>> {
    let mut counts: HashMap<&str, i32> = HashMap::new();
    for t in subs.iter().flat_map(|s| &s.repartition_source_topics) {
        if t.partitions != 0 {
            counts.insert(&t.name, t.partitions);
        }
    }
    loop {
        let mut needed = false;
        let mut progress = false;
        for s in subs {
            for sink in &s.repartition_sink_topics {
                if counts.contains_key(sink.as_str()) {
                    continue;
                }
                // The max of what is known in this pass: a repartition
                // source decided later in the pass does not count (Kafka).
                let known = s
                    .repartition_source_topics
                    .iter()
                    .filter_map(|t| counts.get(t.name.as_str()).copied())
                    .chain(
                        s.source_topics
                            .iter()
                            .filter_map(|t| topics.get(t).map(|(_, n)| *n)),
                    )
                    .max();
                match known {
                    Some(n) => {
                        counts.insert(sink, n);
                        progress = true;
                    }
                    None => needed = true,
                }
            }
        }
        if !needed {
            break;
        }
        if !progress {
            return Err(Stop::Invalid(
                "Failed to compute number of partitions for all repartition topics. There may be \
                 loops in the topology that cannot be resolved."
                    .to_string(),
            ));
        }
    }
    let unwritten = subs
        .iter()
        .flat_map(|s| &s.repartition_source_topics)
        .any(|t| !counts.contains_key(t.name.as_str()));
    if unwritten {
        return Err(Stop::Invalid(
            "Failed to compute number of partitions for all repartition topics, because a \
             repartition source topic is never used as a sink topic."
                .to_string(),
        ));
    }
    Ok(counts)
}

/// 5.3c (`InternalTopicManager.enforceCopartitioning`,
/// `CopartitionedTopicsEnforcer.enforce`).
fn enforce_copartitioning<'a>(
    subs: &[&'a Subtopology],
    groups: &[Vec<Vec<&'a str>>],
    counts: &mut Counts<'a>,
) -> Step<()> {
    let (fixed, flexible): (Vec<&TopicInfo>, Vec<&TopicInfo>) = subs
        .iter()
        .flat_map(|s| &s.repartition_source_topics)
        .partition(|t| t.partitions != 0);
    let fixed: HashSet<&str> = fixed.into_iter().map(|t| t.name.as_str()).collect();
    let flexible: HashSet<&str> = flexible.into_iter().map(|t| t.name.as_str()).collect();
    for group in groups.iter().flatten() {
        if group.is_empty() {
            continue;
        }
        // `group` is already in its HashSet's order; the enforcer's map
        // of the group's repartition topics is built from it.
        let repartition = java_hash_order(
            group
                .iter()
                .copied()
                .filter(|t| fixed.contains(t) || flexible.contains(t)),
        );
        let missing = "Number of partitions is not set for topic: ";
        let repartition: Vec<(&str, i32)> = repartition
            .into_iter()
            .map(|t| Ok((t, counts.expect(t, missing)?)))
            .collect::<Step<_>>()?;
        let others: Vec<(&str, i32)> = group
            .iter()
            .filter(|t| !repartition.iter().any(|(r, _)| r == *t))
            .map(|t| Ok((*t, counts.expect(t, missing)?)))
            .collect::<Step<_>>()?;
        let chosen = if others.is_empty() {
            if !fixed.is_empty() {
                // Kafka's check is global: every fixed repartition topic
                // of the topology must have one count.
                let fixed_counts = fixed
                    .iter()
                    .map(|t| counts.expect(t, missing))
                    .collect::<Step<BTreeSet<i32>>>()?;
                if fixed_counts.len() > 1 {
                    return Err(not_same_partitions(&repartition));
                }
                fixed_counts.into_iter().next().unwrap_or_default()
            } else {
                let max = repartition.iter().fold(0, |m, (_, n)| m.max(*n));
                if max == 0 {
                    let names: Vec<&str> = repartition.iter().map(|(t, _)| *t).collect();
                    return Err(Stop::Invalid(format!(
                        "All topics in the copartition group had undefined partition number: [{}]",
                        names.join(", ")
                    )));
                }
                max
            }
        } else {
            let first = others[0].1;
            if others.iter().any(|(_, n)| *n != first) {
                return Err(not_same_partitions(&others));
            }
            first
        };
        for (topic, n) in &repartition {
            if fixed.contains(topic) && *n != chosen {
                return Err(incorrectly_partitioned(format!(
                    "Number of partitions [{n}] of repartition topic [{topic}] doesn't match \
                     number of partitions [{chosen}] of the source topic."
                )));
            }
        }
        for (topic, _) in repartition {
            counts.decided.insert(topic, chosen);
        }
    }
    Ok(())
}

/// "Following topics do not have the same number of partitions: [{a=3,
/// b=4}]": a Java `TreeMap`'s `toString` inside brackets.
fn not_same_partitions(topics: &[(&str, i32)]) -> Stop {
    let sorted: BTreeMap<&str, i32> = topics.iter().copied().collect();
    let entries: Vec<String> = sorted.iter().map(|(t, n)| format!("{t}={n}")).collect();
    incorrectly_partitioned(format!(
        "Following topics do not have the same number of partitions: [{{{}}}]",
        entries.join(", ")
    ))
}

/// 5.3d (`ChangelogTopics.setup`): a changelog has as many partitions as
/// the largest topic its subtopology reads.
fn changelog_counts<'a>(subs: &[&'a Subtopology], counts: &Counts) -> Step<Vec<(&'a str, i32)>> {
    let mut changelogs = Vec::new();
    for s in subs {
        let mut max = None;
        for t in read_topics(s) {
            let n = counts.expect(t, "No partition count for source topic ")?;
            max = max.max(Some(n));
        }
        let Some(max) = max else {
            return Err(Stop::Invalid(format!(
                "No source topics found for subtopology {}",
                s.id
            )));
        };
        changelogs.extend(
            s.state_changelog_topics
                .iter()
                .map(|t| (t.name.as_str(), max)),
        );
    }
    Ok(changelogs)
}

/// The topics a subtopology reads: its source topics, then its
/// repartition source topics.
fn read_topics(s: &Subtopology) -> impl Iterator<Item = &str> {
    s.source_topics
        .iter()
        .map(String::as_str)
        .chain(s.repartition_source_topics.iter().map(|t| t.name.as_str()))
}

/// 5.3e (`InternalTopicManager.fromPersistedSubtopology`).
fn configured_subtopology(s: &Subtopology, counts: &Counts) -> Step<ConfiguredSubtopology> {
    let mut tasks = None;
    for t in read_topics(s) {
        let n = counts.expect(t, "Number of partitions must be set for topic ")?;
        tasks = tasks.max(Some(n));
    }
    let tasks = tasks.ok_or_else(|| {
        Stop::Invalid("Subtopology does not contain any source topics".to_string())
    })?;
    let repartition_source_topics = internal_topics(&s.repartition_source_topics, counts)?;
    let state_changelog_topics = internal_topics(&s.state_changelog_topics, counts)?;
    if tasks <= 0 {
        return Err(Stop::Invalid(format!(
            "Number of tasks must be positive (subtopology {}: {tasks})",
            s.id
        )));
    }
    Ok(ConfiguredSubtopology {
        tasks,
        source_topics: sorted_distinct(&s.source_topics),
        repartition_sink_topics: sorted_distinct(&s.repartition_sink_topics),
        repartition_source_topics,
        state_changelog_topics,
    })
}

fn sorted_distinct(names: &[String]) -> Vec<String> {
    let set: BTreeSet<&String> = names.iter().collect();
    set.into_iter().cloned().collect()
}

/// Repartition source or changelog topics with their decided partition
/// counts (a non-zero `Partitions` of the client is kept), sorted by name.
/// The replication factor and configs stay as the client sent them.
fn internal_topics(infos: &[TopicInfo], counts: &Counts) -> Step<Vec<TopicInfo>> {
    let mut out: BTreeMap<&str, TopicInfo> = BTreeMap::new();
    for info in infos {
        let partitions = if info.partitions != 0 {
            info.partitions
        } else {
            // The decided count, not the cluster's (Kafka).
            *counts.decided.get(info.name.as_str()).ok_or_else(|| {
                Stop::Invalid(format!(
                    "Number of partitions must be set for topic {}",
                    info.name
                ))
            })?
        };
        let mut keys = HashSet::new();
        if let Some((key, _)) = info.configs.iter().find(|(k, _)| !keys.insert(k)) {
            return Err(Stop::Invalid(format!(
                "Duplicate config {key} for topic {}",
                info.name
            )));
        }
        let topic = TopicInfo {
            partitions,
            ..info.clone()
        };
        if out.insert(&info.name, topic).is_some() {
            return Err(Stop::Invalid(format!("Duplicate topic {}", info.name)));
        }
    }
    Ok(out.into_values().collect())
}

/// 5.3f (`InternalTopicManager.missingInternalTopics`): the repartition
/// source and changelog topics that do not exist yet, sorted by name; an
/// existing one must have its decided count.
fn missing_internal_topics(
    subtopologies: &BTreeMap<String, ConfiguredSubtopology>,
    subs: &[&Subtopology],
    topics: &Topics,
) -> Step<Vec<CreatableTopic>> {
    let mut to_create: BTreeMap<&str, CreatableTopic> = BTreeMap::new();
    for s in subtopologies.values() {
        for t in s
            .repartition_source_topics
            .iter()
            .chain(&s.state_changelog_topics)
        {
            let replication_factor = if t.replication_factor != 0 {
                t.replication_factor
            } else {
                -1
            };
            let topic = CreatableTopic {
                name: t.name.clone(),
                partitions: t.partitions,
                replication_factor,
                configs: t.configs.clone(),
            };
            to_create.insert(&t.name, topic);
        }
    }
    // Kafka's `requiredTopics()` is a HashSet: its order decides which
    // wrongly sized topic is reported.
    let required = java_hash_order(subs.iter().flat_map(|s| {
        read_topics(s).chain(s.state_changelog_topics.iter().map(|t| t.name.as_str()))
    }));
    for topic in required {
        let Some((_, found)) = topics.get(topic) else {
            continue;
        };
        if let Some(expected) = to_create.remove(topic) {
            if expected.partitions != *found {
                return Err(incorrectly_partitioned(format!(
                    "Existing topic {topic} has different number of partitions: expected {}, \
                     found {found}",
                    expected.partitions
                )));
            }
        }
    }
    Ok(to_create.into_values().collect())
}

/// Kafka's `summarizeTopics`: at most three names, then " and N additional
/// topics".
fn summarize_topics(topics: &[&str]) -> String {
    if topics.is_empty() {
        return "<none>".to_string();
    }
    let shown = topics[..topics.len().min(3)].join(", ");
    if topics.len() > 3 {
        format!("{shown} and {} additional topics", topics.len() - 3)
    } else {
        shown
    }
}

/// The subtopologies in the order Kafka's `HashMap` by id iterates them;
/// a duplicate id fails (Kafka: `Collectors.toMap`'s
/// `IllegalStateException`).
fn subtopologies_in_java_order(topology: &Topology) -> Result<Vec<&Subtopology>, String> {
    let mut by_id: HashMap<&str, &Subtopology> = HashMap::new();
    for s in &topology.subtopologies {
        if by_id.insert(&s.id, s).is_some() {
            return Err(format!("Duplicate subtopology id {}", s.id));
        }
    }
    let ids = java_hash_order(topology.subtopologies.iter().map(|s| s.id.as_str()));
    Ok(ids.into_iter().map(|id| by_id[id]).collect())
}

/// A subtopology's copartition groups as topic names, each in its Java
/// `HashSet`'s order (source topics, then repartition source topics;
/// regex indexes are ignored, as Kafka does).
fn copartition_groups<'a>(s: &'a Subtopology) -> Result<Vec<Vec<&'a str>>, String> {
    let at = |names: &[&'a str], i: i16, what: &str| -> Result<&'a str, String> {
        match usize::try_from(i).ok().and_then(|i| names.get(i)) {
            Some(name) => Ok(*name),
            None => Err(format!(
                "Copartition group of subtopology {} refers to {what} topic index {i}, but \
                 there are {}",
                s.id,
                names.len()
            )),
        }
    };
    let sources: Vec<&str> = s.source_topics.iter().map(String::as_str).collect();
    let repartition: Vec<&str> = s
        .repartition_source_topics
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    s.copartition_groups
        .iter()
        .map(|g| {
            let mut names = Vec::new();
            for i in &g.source_topics {
                names.push(at(&sources, *i, "source")?);
            }
            for i in &g.repartition_source_topics {
                names.push(at(&repartition, *i, "repartition source")?);
            }
            Ok(java_hash_order(names))
        })
        .collect()
}

/// Java's `HashMap.hash` of a `String` key: `hashCode()` (31·h + UTF-16
/// unit) with its high half folded into the low half.
fn java_hash(key: &str) -> u32 {
    let h = key
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c))) as u32;
    h ^ (h >> 16)
}

/// The distinct `keys` in the order a Java `HashMap`/`HashSet` created
/// with the default capacity (16, load factor 0.75) iterates them after
/// they are put in this order: by bucket (`hash & (capacity - 1)`), within
/// a bucket by insertion. The capacity doubles past 3/4 full, and when a
/// bucket would get a ninth entry in a table under 64. A bucket of nine in
/// a table of 64 or more becomes a tree whose order is not reproduced
/// (nine names sharing the low bits of their hashes; not seen in
/// practice).
fn java_hash_order<'a>(keys: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut entries: Vec<(&str, u32)> = Vec::new();
    let mut seen = HashSet::new();
    let mut capacity: u32 = 16;
    for key in keys {
        if !seen.insert(key) {
            continue;
        }
        let hash = java_hash(key);
        let mask = capacity - 1;
        let in_bucket = entries
            .iter()
            .filter(|(_, h)| h & mask == hash & mask)
            .count();
        entries.push((key, hash));
        if in_bucket >= 8 && capacity < 64 {
            capacity *= 2;
        }
        if entries.len() > (capacity as usize) * 3 / 4 {
            capacity *= 2;
        }
    }
    let mask = capacity - 1;
    entries.sort_by_key(|(_, h)| h & mask);
    entries.into_iter().map(|(k, _)| k).collect()
}

#[cfg(test)]
#[path = "topology_tests.rs"]
mod tests;
