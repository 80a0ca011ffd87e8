//! Checking a request's key rules: against the index, the keys of earlier requests of the same
//! group commit and of earlier records of the same request. A lookup is one point read (or none,
//! when the key filter says the key is absent), so the check costs the same however long the log
//! grows.

use mnemo_core::{Position, RuleRef, StreamId};

use super::filter::KeyFilter;
use super::group_table::GroupTable;
use super::layout::{Fingerprint, decode_position, encode_value_into, fingerprint};
use super::read::read_value;
use crate::backend::{AppendRequest, KeyRefusal, NewRecord};
use crate::error::{CorruptionKind, LogError};
use crate::shared::Shared;

/// The processor's cache line: what one read brings into its cache.
const CACHE_LINE_BYTES: usize = 64;

/// Where a record of the group is: its request's index in the group, and its index in the request.
#[derive(Debug, Clone, Copy)]
struct RecordAt {
    request: usize,
    record: usize,
}

/// A key as the group knows it: each key is read from the committed index at most once per group,
/// since nothing but the group's own batch changes that index before the group commits. Claimed
/// values are compared by their fingerprints.
#[derive(Debug, Clone, Copy)]
enum Known {
    /// Not in the committed index and not written by the group.
    Absent,
    /// In the committed index.
    Logged { position: Position, value: Fingerprint },
    /// Written by a request of the group (a key is only ever written where it was absent); an
    /// identity key with the record holding it.
    Pending { position: Position, value: Fingerprint, holder: Option<RecordAt> },
}

impl Known {
    fn held_at(self) -> Option<Position> {
        match self {
            Known::Absent => None,
            Known::Logged { position, .. } | Known::Pending { position, .. } => Some(position),
        }
    }

    fn value(self) -> Option<Fingerprint> {
        match self {
            Known::Absent => None,
            Known::Logged { value, .. } | Known::Pending { value, .. } => Some(value),
        }
    }

    /// Whether the holder is the same record as `record` on `stream`.
    fn is_record(
        self,
        shared: &Shared,
        group: &[&AppendRequest],
        stream: &StreamId,
        record: &NewRecord,
    ) -> Result<bool, LogError> {
        let same = |s: &StreamId, kind: u16, schema: u16, bytes: &[u8]| {
            s == stream && kind == record.kind && schema == record.kind_schema && bytes == record.bytes
        };
        match self {
            Known::Absent | Known::Pending { holder: None, .. } => Ok(false),
            Known::Pending { holder: Some(at), .. } => {
                let request = group[at.request];
                let held = &request.records[at.record];
                Ok(same(&request.stream, held.kind, held.kind_schema, &held.bytes))
            }
            Known::Logged { position, .. } => {
                let envelope = shared.read(position)?.ok_or_else(|| LogError::Corrupt {
                    position,
                    kind: CorruptionKind::StreamIndex(
                        "the key index points at a missing envelope".to_owned(),
                    ),
                })?;
                Ok(same(&envelope.stream, envelope.kind, envelope.kind_schema, &envelope.record))
            }
        }
    }
}

/// A key a request of the group writes: its fingerprint, and where its value (the holder's
/// position, then the claimed value) is in the group's bytes.
#[derive(Debug, Clone)]
struct Write {
    fingerprint: Fingerprint,
    value: std::ops::Range<usize>,
}

/// The keys of one group commit as far as its requests have looked them up or written them, and
/// the keys the group writes. The writer keeps one for its whole life and starts it afresh for
/// each group, so that its memory is allocated once rather than per group (freshly allocated
/// memory is faulted in and zeroed page by page).
pub(super) struct GroupKeys {
    /// Answers most lookups of absent keys without a read.
    filter: KeyFilter,
    known: GroupTable<Known>,
    writes: Vec<Write>,
    /// The values of `writes` as the keyspace holds them, end to end.
    bytes: Vec<u8>,
    /// The fingerprints of the keys of the request being decided, rule after rule and record after
    /// record; `rules_from[r]` is where record `r`'s begin.
    prints: Vec<Fingerprint>,
    rules_from: Vec<usize>,
    /// Beside `prints`: whether the rule is the same as the rule in the same place of the record
    /// before (the events of one invocation claim the same run and turn and forbid the same seal).
    repeats: Vec<bool>,
    /// The fingerprint of an empty value (what every key but a claim holds).
    empty_print: Fingerprint,
}

/// What the index says of a request.
pub(crate) enum Decision {
    /// Per record, where it already is when it is a retry (`None`: a new record). The keys the new
    /// records write are the group's writes from `writes_from` on: the writer either writes them
    /// with the request's envelopes or forgets them (`KeyIndex::forget`, through
    /// [`GroupKeys::undo`]).
    Go { retried: Vec<Option<Position>>, writes_from: usize },
    /// A rule is broken; nothing of the request is appended and the group holds none of its keys.
    Refused(KeyRefusal),
}

impl GroupKeys {
    pub(super) fn new(filter: KeyFilter) -> GroupKeys {
        GroupKeys {
            filter,
            known: GroupTable::new(),
            writes: Vec::new(),
            bytes: Vec::new(),
            prints: Vec::new(),
            rules_from: Vec::new(),
            repeats: Vec::new(),
            empty_print: fingerprint(&[]),
        }
    }

    /// Forgets the last group's keys, keeping the memory they took.
    pub(super) fn start_group(&mut self) {
        self.filter.poll();
        self.known.clear();
        self.writes.clear();
        self.bytes.clear();
    }

    /// The store is closing: a filter still being built is abandoned.
    pub(super) fn close(&mut self) {
        self.filter.stop();
    }

    /// The key of fingerprint `print` as the group knows it, read from the committed index the
    /// first time.
    fn get(&mut self, shared: &Shared, print: Fingerprint) -> Result<Known, LogError> {
        if let Some(known) = self.known.get(print) {
            return Ok(known);
        }
        // NOTE: an absent key is not remembered: asking the filter again costs less than an
        // insert, and most such keys are written at once, which puts them in the table anyway.
        if !self.filter.may_contain(print) {
            return Ok(Known::Absent);
        }
        let known = match read_value(shared, print)? {
            None => Known::Absent,
            Some(value) => {
                Known::Logged { position: decode_position(&value)?, value: fingerprint(&value[8..]) }
            }
        };
        self.known.insert(print, known);
        Ok(known)
    }

    /// Writes a key (of fingerprint `print`) for a record; `self.writes[from..]` are the record's
    /// own earlier writes.
    fn write(
        &mut self,
        from: usize,
        print: Fingerprint,
        position: Position,
        value: &[u8],
        holder: Option<RecordAt>,
    ) {
        // NOTE: a key is written only where it was absent, or again by the same record (an
        // identity after a claim of the same bytes): the record's earlier write is replaced, so
        // that undoing the request leaves the key absent as it found it.
        let value_print = if value.is_empty() { self.empty_print } else { fingerprint(value) };
        // NOTE: the filter learns the key only once the group is committed (`learn_written`):
        // until then the group's own lookups find it in `known`.
        self.known.insert(print, Known::Pending { position, value: value_print, holder });
        let value_start = self.bytes.len();
        encode_value_into(&mut self.bytes, position, value);
        let write = Write { fingerprint: print, value: value_start..self.bytes.len() };
        match self.writes[from..].iter_mut().find(|earlier| earlier.fingerprint == print) {
            Some(earlier) => *earlier = write,
            None => self.writes.push(write),
        }
    }

    /// Takes back the keys of the last request decided, which is not appended after all: the
    /// group's writes from `from` on.
    pub(super) fn undo(&mut self, from: usize) {
        for write in self.writes.drain(from..) {
            self.known.insert(write.fingerprint, Known::Absent);
        }
    }

    /// Decides the rules of `group[index]` against the group's keys and the committed index.
    /// `first_position` is where its first new record will land.
    pub(super) fn decide(
        &mut self,
        shared: &Shared,
        group: &[&AppendRequest],
        index: usize,
        first_position: Position,
    ) -> Result<Decision, LogError> {
        let writes_from = self.writes.len();
        match self.decide_records(shared, group, index, first_position) {
            Ok(Ok(retried)) => Ok(Decision::Go { retried, writes_from }),
            Ok(Err(refusal)) => {
                self.undo(writes_from);
                Ok(Decision::Refused(refusal))
            }
            Err(error) => {
                self.undo(writes_from);
                Err(error)
            }
        }
    }

    /// Per record, where it already is when it is a retry; or the first rule broken. The keys the
    /// new records write are added to the group's writes as they are decided.
    fn decide_records(
        &mut self,
        shared: &Shared,
        group: &[&AppendRequest],
        request_index: usize,
        first_position: Position,
    ) -> Result<Result<Vec<Option<Position>>, KeyRefusal>, LogError> {
        let request = group[request_index];
        self.fingerprint_rules(request);
        let mut retried = Vec::with_capacity(request.records.len());
        let mut next = first_position;
        // Where the group's writes of the record before begin, when it was new (its rules were all
        // checked).
        let mut new_before: Option<usize> = None;
        for (index, record) in request.records.iter().enumerate() {
            let refuse =
                |rule: RuleRef<'_>, held_at| KeyRefusal { record: index, rule: rule.to_rule(), held_at };
            let prints_from = self.rules_from[index];
            match self.identity(shared, group, &request.stream, record, prints_from)? {
                Identity::Retry(original) => {
                    retried.push(Some(original));
                    new_before = None;
                    continue;
                }
                Identity::Conflict(rule, held_at) => return Ok(Err(refuse(rule, Some(held_at)))),
                Identity::New => {}
            }
            let from = self.writes.len();
            for (rule_index, rule) in record.rules.iter().enumerate() {
                let print = self.prints[prints_from + rule_index];
                if self.repeats[prints_from + rule_index]
                    && new_before
                        .is_some_and(|writes_before| self.holds_as_before(rule, print, writes_before))
                {
                    continue;
                }
                let write = if matches!(rule, RuleRef::Identity(_)) {
                    // Looked up by `identity` just now: absent, or written by this very record.
                    Some(&[][..])
                } else {
                    let known = self.get(shared, print)?;
                    match (rule, known.value()) {
                        (RuleRef::Claim { value, .. }, None) => Some(value),
                        (RuleRef::Claim { value, .. }, Some(held)) if held == fingerprint(value) => None,
                        (RuleRef::Unique(_), None) => Some(&[][..]),
                        (RuleRef::Requires(_), Some(_)) | (RuleRef::Forbids(_), None) => None,
                        // A claim of another value, a unique or forbidden key held, a required key
                        // absent; and a rule this build does not know refuses rather than passing
                        // unchecked.
                        _ => return Ok(Err(refuse(rule, known.held_at()))),
                    }
                };
                if let Some(value) = write {
                    let holder = matches!(rule, RuleRef::Identity(_))
                        .then_some(RecordAt { request: request_index, record: index });
                    self.write(from, print, next, value, holder);
                }
            }
            next = next.next();
            retried.push(None);
            new_before = Some(from);
        }
        Ok(Ok(retried))
    }

    /// Whether `rule`, the same as the rule in its place in the record before, which was new and
    /// whose writes are the group's from `writes_before` on, holds as it held there: a claim met or
    /// written stays met, a required key stays held, and a forbidden key stays absent unless that
    /// record or this one has written it since (a terminal event seals its run). Such a rule needs
    /// no lookup and writes nothing.
    fn holds_as_before(&self, rule: RuleRef<'_>, print: Fingerprint, writes_before: usize) -> bool {
        match rule {
            RuleRef::Claim { .. } | RuleRef::Requires(_) => true,
            RuleRef::Forbids(_) => {
                self.writes[writes_before..].iter().all(|write| write.fingerprint != print)
            }
            RuleRef::Identity(_) | RuleRef::Unique(_) => false,
        }
    }

    /// Fingerprints the keys of every rule of `request` into `prints`, then has the filter fetch
    /// the memory it will read for each.
    ///
    /// NOTE: the filter is larger than the processor's caches past a few hundred thousand keys,
    /// and a lookup that waited for its block took most of the writer's time per key. The fetches
    /// are a loop of their own: interleaved with the hashing, only the two or three fetches within
    /// the processor's window of instructions were under way at once, and the writer still waited
    /// for most of each (`perf annotate`: 70% of the request's decision at the fetch).
    ///
    /// A rule the same as the one in its place in the record before takes that one's fingerprint
    /// and is marked in `repeats`: comparing the bytes costs less than hashing them.
    fn fingerprint_rules(&mut self, request: &AppendRequest) {
        fetch_rules(&request.records);
        self.prints.clear();
        self.rules_from.clear();
        self.repeats.clear();
        let mut before: Option<(&NewRecord, usize)> = None;
        for record in &request.records {
            let from = self.prints.len();
            self.rules_from.push(from);
            let mut rules_before = before.map(|(record, _)| record.rules.iter());
            for (rule_index, rule) in record.rules.iter().enumerate() {
                let same = rules_before.as_mut().and_then(Iterator::next) == Some(rule);
                let print = match before {
                    Some((_, before_from)) if same => self.prints[before_from + rule_index],
                    _ => fingerprint(rule.key()),
                };
                self.prints.push(print);
                self.repeats.push(same);
            }
            before = Some((record, from));
        }
        // NOTE: a repeated rule's block was fetched for the record before.
        let fresh = self.prints.iter().zip(&self.repeats).filter(|(_, repeat)| !**repeat);
        self.filter.fetch_all(fresh.map(|(print, _)| *print));
    }

    /// What the record's identity keys say (their fingerprints in `prints` from `prints_from`):
    /// the first one held tells a retry (held by the same record) from a conflict; none held, the
    /// record is new.
    fn identity<'r>(
        &mut self,
        shared: &Shared,
        group: &[&AppendRequest],
        stream: &StreamId,
        record: &'r NewRecord,
        prints_from: usize,
    ) -> Result<Identity<'r>, LogError> {
        for (rule_index, rule) in record.rules.iter().enumerate() {
            if !matches!(rule, RuleRef::Identity(_)) {
                continue;
            }
            let known = self.get(shared, self.prints[prints_from + rule_index])?;
            let Some(held_at) = known.held_at() else { continue };
            return Ok(if known.is_record(shared, group, stream, record)? {
                Identity::Retry(held_at)
            } else {
                Identity::Conflict(rule, held_at)
            });
        }
        Ok(Identity::New)
    }

    /// Tells the filter of the keys the group wrote, once the group is committed and its callers
    /// answered, and before the next group is decided, so that no lookup of the next group misses
    /// one.
    ///
    /// NOTE: here rather than as each key is decided, where the block was in the cache from the
    /// key's lookup: there it cost the callers' wait about 30 ms per 1M events (`perf`), here it
    /// runs while the caller prepares its next request. A key of a request undone or of a failed
    /// batch is then never added either.
    pub(super) fn learn_written(&mut self) {
        self.filter.add_all(self.writes.iter().map(|write| write.fingerprint));
    }

    /// The keys the group writes: each key's fingerprint and the `keys` keyspace's value for it.
    pub(super) fn entries(&self) -> impl Iterator<Item = (Fingerprint, &[u8])> + '_ {
        self.writes.iter().map(|write| (write.fingerprint, &self.bytes[write.value.clone()]))
    }

    /// How many keys the group writes.
    #[cfg(test)]
    pub(super) fn written(&self) -> usize {
        self.writes.len()
    }
}

/// Reads a byte of each cache line of every record's rules, so that they are in the processor's
/// cache when the rules are walked soon after. The bytes are folded together and the fold used only
/// at the end, so that no read waits for another and many are under way at once.
///
/// NOTE: the caller's thread wrote the rules, a buffer per record, and the writer's first read of
/// each waited for it to come from memory or the other processor's cache: `perf annotate` put 29%
/// of the writer's decisions at the reads of two rules' lengths (decision 0142).
fn fetch_rules(records: &[NewRecord]) {
    let fetched = records.iter().fold(0u8, |fold, record| {
        let rules = record.rules.as_bytes();
        let lines = rules.iter().step_by(CACHE_LINE_BYTES).fold(fold, |fold, &byte| fold ^ byte);
        lines ^ rules.last().copied().unwrap_or(0)
    });
    std::hint::black_box(fetched);
}

/// What a record's identity says of it.
enum Identity<'r> {
    New,
    /// The same record is already at this position (or written by the group at it).
    Retry(Position),
    /// Another record holds the identity, at this position.
    Conflict(RuleRef<'r>, Position),
}

#[cfg(test)]
mod tests {
    use mnemo_core::KeyRule;

    use super::*;
    use crate::backend::ExpectedRevision;
    use crate::shared::shared_for_tests;

    fn request(stream: &str, records: Vec<NewRecord>) -> AppendRequest {
        let stream = StreamId::new(stream.to_owned()).expect("stream id");
        AppendRequest::new(stream, ExpectedRevision::Any, records)
    }

    fn group_keys(shared: &std::sync::Arc<Shared>) -> GroupKeys {
        GroupKeys::new(KeyFilter::start(std::sync::Arc::clone(shared)))
    }

    fn event(id: &str, bytes: &[u8], rules: Vec<KeyRule>) -> NewRecord {
        let mut all = vec![KeyRule::Identity(id.as_bytes().to_vec())];
        all.extend(rules);
        NewRecord::new(1, 1, bytes.to_vec()).with_rules(all)
    }

    fn claim(key: &str, value: &str) -> KeyRule {
        KeyRule::Claim { key: key.as_bytes().to_vec(), value: value.as_bytes().to_vec() }
    }

    #[test]
    fn a_request_taken_back_leaves_its_keys_to_the_next_request_of_the_group() {
        let dir = tempfile::tempdir().expect("tempdir");
        let shared = shared_for_tests(dir.path()).expect("store");
        let first = request("session/a", vec![event("e1", b"one", vec![claim("run", "a")])]);
        let second = request("session/b", vec![event("e1", b"other", vec![claim("run", "b")])]);
        let group = [&first, &second];
        let mut keys = group_keys(&shared);
        // The writer takes the first request back (its expected revision did not match).
        let Decision::Go { writes_from, .. } = keys.decide(&shared, &group, 0, Position(1)).expect("decide")
        else {
            panic!("the first request is refused");
        };
        assert_eq!(keys.writes.len() - writes_from, 2);
        keys.undo(writes_from);
        let decided = keys.decide(&shared, &group, 1, Position(1)).expect("decide");
        assert!(matches!(decided, Decision::Go { ref retried, .. } if retried == &[None]));
    }

    #[test]
    fn a_refused_request_holds_none_of_the_keys_its_earlier_records_wrote() {
        let dir = tempfile::tempdir().expect("tempdir");
        let shared = shared_for_tests(dir.path()).expect("store");
        let refused = request(
            "session/a",
            vec![event("e1", b"one", vec![claim("run", "a")]), event("e2", b"two", vec![claim("run", "b")])],
        );
        let next = request("session/b", vec![event("e1", b"other", vec![claim("run", "b")])]);
        let group = [&refused, &next];
        let mut keys = group_keys(&shared);
        let Decision::Refused(refusal) = keys.decide(&shared, &group, 0, Position(1)).expect("decide") else {
            panic!("two claims of one key with two values are taken");
        };
        assert_eq!((refusal.record, refusal.held_at), (1, Some(Position(1))));
        assert!(keys.writes.is_empty());
        let decided = keys.decide(&shared, &group, 1, Position(1)).expect("decide");
        assert!(matches!(decided, Decision::Go { ref retried, .. } if retried == &[None]));
    }

    #[test]
    fn keys_written_earlier_in_the_group_decide_retries_and_conflicts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let shared = shared_for_tests(dir.path()).expect("store");
        let first = request("session/a", vec![event("e1", b"one", vec![claim("run", "a")])]);
        let retry = request("session/a", vec![event("e1", b"one", vec![claim("run", "a")])]);
        let conflict = request("session/a", vec![event("e1", b"changed", vec![])]);
        let other_claim = request("session/a", vec![event("e2", b"two", vec![claim("run", "b")])]);
        let group = [&first, &retry, &conflict, &other_claim];
        let mut keys = group_keys(&shared);
        assert!(matches!(keys.decide(&shared, &group, 0, Position(7)).expect("decide"), Decision::Go { .. }));
        let written = keys.writes.len();
        let decided = keys.decide(&shared, &group, 1, Position(8)).expect("decide");
        assert!(matches!(decided, Decision::Go { ref retried, .. } if retried == &[Some(Position(7))]));
        assert_eq!(keys.writes.len(), written, "a retry writes nothing");
        let Decision::Refused(refusal) = keys.decide(&shared, &group, 2, Position(8)).expect("decide") else {
            panic!("the same identity with other bytes is taken");
        };
        assert_eq!((refusal.record, refusal.held_at), (0, Some(Position(7))));
        let Decision::Refused(refusal) = keys.decide(&shared, &group, 3, Position(8)).expect("decide") else {
            panic!("a claim of another value is taken");
        };
        assert_eq!(refusal.rule, claim("run", "b"));
    }

    #[test]
    fn a_new_group_forgets_the_keys_the_last_group_held_but_did_not_commit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let shared = shared_for_tests(dir.path()).expect("store");
        let first = request("session/a", vec![event("e1", b"one", vec![claim("run", "a")])]);
        let other = request("session/a", vec![event("e1", b"other", vec![claim("run", "b")])]);
        let mut keys = group_keys(&shared);
        assert!(matches!(
            keys.decide(&shared, &[&first], 0, Position(1)).expect("decide"),
            Decision::Go { .. }
        ));
        // The first group's batch never committed (the writer was poisoned, say): the next group
        // decides against the committed index only.
        keys.start_group();
        let decided = keys.decide(&shared, &[&other], 0, Position(1)).expect("decide");
        assert!(matches!(decided, Decision::Go { ref retried, .. } if retried == &[None]));
        assert_eq!(keys.written(), 2, "its identity and its claim");
    }

    #[test]
    fn rules_repeated_from_the_record_before_are_decided_as_that_record_left_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let shared = shared_for_tests(dir.path()).expect("store");
        let seal = || KeyRule::Forbids(b"seal".to_vec());
        let sealing = KeyRule::Unique(b"seal".to_vec());
        let run = request(
            "session/a",
            vec![
                event("e1", b"one", vec![claim("run", "a"), seal()]),
                event("e2", b"two", vec![claim("run", "a"), seal()]),
                event("e3", b"end", vec![claim("run", "a"), seal(), sealing.clone()]),
                event("e4", b"late", vec![claim("run", "a"), seal()]),
            ],
        );
        let mut keys = group_keys(&shared);
        let Decision::Refused(refusal) = keys.decide(&shared, &[&run], 0, Position(1)).expect("decide")
        else {
            panic!("an event after the one that sealed its run, in the same request, is taken");
        };
        assert_eq!((refusal.record, refusal.rule, refusal.held_at), (3, seal(), Some(Position(3))));

        keys.start_group();
        let open = request(
            "session/a",
            vec![
                event("e1", b"one", vec![claim("run", "a"), seal()]),
                event("e2", b"two", vec![claim("run", "a"), seal()]),
            ],
        );
        let Decision::Go { retried, .. } = keys.decide(&shared, &[&open], 0, Position(1)).expect("decide")
        else {
            panic!("two events of an open run are refused");
        };
        assert_eq!(retried, vec![None, None]);
        assert_eq!(keys.written(), 3, "two identities and one claim: the repeated claim writes nothing");

        // A retried record's rules are not checked, so the next record's same rules are.
        keys.start_group();
        let sealed = request("session/a", vec![event("e9", b"end", vec![sealing])]);
        let after_retry = request(
            "session/a",
            vec![
                event("e6", b"six", vec![claim("other", "x")]),
                event("e9", b"end", vec![seal()]),
                event("e5", b"five", vec![seal()]),
            ],
        );
        let group = [&sealed, &after_retry];
        assert!(matches!(keys.decide(&shared, &group, 0, Position(1)).expect("decide"), Decision::Go { .. }));
        let Decision::Refused(refusal) = keys.decide(&shared, &group, 1, Position(2)).expect("decide") else {
            panic!("a forbidden key held is passed after a retry with the same rule");
        };
        assert_eq!((refusal.record, refusal.held_at), (2, Some(Position(1))));
    }
}
