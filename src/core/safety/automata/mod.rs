//! The scanner's automata, compiled at build time.
//!
//! Every regex the scanner runs (the per-view rule sets, each
//! keyword-gated rule, the wallet-key labels) is compiled
//! natively from the rule table into a Thompson NFA, encoded by `codec`, and
//! kept in `rules.bin`, which the binary embeds. At run time an automaton is
//! only rebuilt from its states (no regex parsing or compilation), the first
//! time it is needed, and searched with regex-automata's lazy DFA (match /
//! which-patterns) or its PikeVM (capture groups). So an isolate that only
//! serves reads never touches any of it, and a fresh isolate's first write
//! loads only what its strings need (milliseconds; figures in the README)
//! instead of compiling everything (~130 ms in wasm before).
//!
//! Why not serialised DFAs: full DFAs of this rule table are tens of MB
//! (counted repetitions in unanchored searches multiply states; the keyword
//! sets alone were 10 MB, and are now an Aho-Corasick automaton built from
//! their literals on first use, in `engine`), far over a Worker's size.
//!
//! `generate`'s tests rebuild `rules.bin` from the rule table and fail when
//! it differs (regenerate with `npm run regen`, or `SELFCAP_REGEN=1 cargo
//! test --lib safety`, then test again: docs/GENERATED.md), and each entry
//! is keyed by a hash of its own source text: an automaton whose rule was
//! edited without regenerating is never found, so a stale table fails closed
//! (the scan panics, so the write is never accepted) instead of scanning
//! with old rules.

pub(super) mod codec;
#[cfg(test)]
mod generate;

use regex_automata::hybrid::dfa::{Cache as DfaCache, DFA};
use regex_automata::nfa::thompson::pikevm::{Cache as PikeCache, PikeVM};
use regex_automata::nfa::thompson::NFA;
use regex_automata::util::pool::Pool;
use regex_automata::{Input, MatchKind, PatternSet};

/// What an automaton is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Which of several patterns match anywhere (`RegexSet::matches`).
    Which,
    /// Where one pattern matches (`Regex::is_match`, the ends of
    /// `Regex::find_iter`).
    Match,
    /// One pattern's capture groups, match by match (`Regex::captures_iter`).
    Captures,
}

/// The text an automaton is compiled from: patterns in the rule syntax
/// (`regex::bytes` with Unicode mode off).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Source {
    pub kind: Kind,
    pub patterns: Vec<String>,
}

impl Source {
    pub fn new(kind: Kind, patterns: Vec<String>) -> Source {
        Source { kind, patterns }
    }

    /// FNV-1a over the kind and the patterns: the entry's key in `rules.bin`.
    fn key(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |b: u8| {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        };
        eat(self.kind as u8);
        for p in &self.patterns {
            p.bytes().for_each(&mut eat);
            eat(0);
        }
        h
    }
}

/// A literal as a pattern: the regex meta characters (the set
/// `regex_syntax::is_meta_character` names) escaped, everything else as
/// itself, as `regex::escape` does.
pub(super) fn escape(literal: &str) -> String {
    let mut out = String::new();
    for c in literal.chars() {
        if r"\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The embedded table: `SCA1`, an entry count, then per entry its key,
/// offset and length (little-endian u64, u32, u32), sorted by key; then the
/// encoded NFAs.
static TABLE: &[u8] = include_bytes!("rules.bin");

const MAGIC: &[u8; 4] = b"SCA1";
const ENTRY: usize = 16;

fn find(table: &[u8], key: u64) -> Option<&[u8]> {
    let count = u32::from_le_bytes(table.get(4..8)?.try_into().ok()?) as usize;
    let index = table.get(8..8 + count * ENTRY)?;
    let key_at = |i: usize| u64::from_le_bytes(index[i * ENTRY..i * ENTRY + 8].try_into().unwrap());
    let (mut lo, mut hi) = (0, count);
    while lo < hi {
        let mid = (lo + hi) / 2;
        match key_at(mid).cmp(&key) {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => {
                let e = &index[mid * ENTRY..(mid + 1) * ENTRY];
                let at = u32::from_le_bytes(e[8..12].try_into().ok()?) as usize;
                let len = u32::from_le_bytes(e[12..16].try_into().ok()?) as usize;
                return table.get(at..at.checked_add(len)?);
            }
        }
    }
    None
}

type MakeDfaCache =
    Box<dyn Fn() -> DfaCache + Send + Sync + std::panic::UnwindSafe + std::panic::RefUnwindSafe>;
type MakePikeCache =
    Box<dyn Fn() -> PikeCache + Send + Sync + std::panic::UnwindSafe + std::panic::RefUnwindSafe>;

/// One rebuilt automaton with its search caches (kept between scans: the
/// lazy DFA's states are what make a warm scan fast).
pub(super) struct Automaton {
    kind: Kind,
    patterns: usize,
    dfa: DFA,
    dfa_caches: Pool<DfaCache, MakeDfaCache>,
    pike: PikeVM,
    pike_caches: Pool<PikeCache, MakePikeCache>,
}

impl Automaton {
    /// The automaton compiled from `source`. Panics if `rules.bin` has no
    /// entry for it (the table is stale: a build defect, and failing closed
    /// beats scanning without the rule; the generate test catches it first).
    pub fn load(source: &Source) -> Automaton {
        let bytes = TABLE
            .starts_with(MAGIC)
            .then(|| find(TABLE, source.key()))
            .flatten()
            .unwrap_or_else(|| panic!("safety automata are stale: no entry for {source:?}"));
        let (nfa, _) = codec::decode(bytes).expect("safety automata decode");
        Automaton::from_nfa(source.kind, nfa)
    }

    fn from_nfa(kind: Kind, nfa: NFA) -> Automaton {
        let match_kind = match kind {
            Kind::Which => MatchKind::All,
            Kind::Match | Kind::Captures => MatchKind::LeftmostFirst,
        };
        let patterns = nfa.pattern_len();
        let dfa = DFA::builder()
            .configure(DFA::config().match_kind(match_kind))
            .build_from_nfa(nfa.clone())
            .expect("lazy DFA from a compiled NFA");
        let pike = PikeVM::builder()
            .configure(PikeVM::config().match_kind(match_kind))
            .build_from_nfa(nfa)
            .expect("PikeVM from a compiled NFA");
        let for_dfa = dfa.clone();
        let for_pike = pike.clone();
        Automaton {
            kind,
            patterns,
            dfa,
            dfa_caches: Pool::new(Box::new(move || DfaCache::new(&for_dfa))),
            pike,
            pike_caches: Pool::new(Box::new(move || for_pike.create_cache())),
        }
    }

    /// Whether the (single) pattern matches anywhere in `hay`.
    pub fn is_match(&self, hay: &[u8]) -> bool {
        debug_assert_ne!(self.kind, Kind::Which);
        let input = Input::new(hay).earliest(true);
        match self.dfa.try_search_fwd(&mut self.dfa_caches.get(), &input) {
            Ok(found) => found.is_some(),
            // The lazy DFA can only give up on a pathological cache thrash;
            // the PikeVM answers the same question without a cache limit.
            Err(_) => self.pike.is_match(&mut self.pike_caches.get(), input),
        }
    }

    /// The end offsets of the successive leftmost-first matches in `hay`,
    /// as `Regex::find_iter` finds them (a forward search reports where the
    /// leftmost-first match ends, and the next search starts there).
    pub fn match_ends(&self, hay: &[u8]) -> Vec<usize> {
        debug_assert_eq!(self.kind, Kind::Match);
        let mut ends = Vec::new();
        let mut at = 0;
        let mut cache = self.dfa_caches.get();
        while at <= hay.len() {
            match self
                .dfa
                .try_search_fwd(&mut cache, &Input::new(hay).range(at..))
            {
                Ok(Some(m)) => {
                    let end = m.offset();
                    if end == at {
                        // An empty match: find_iter moves one byte on.
                        if ends.last() != Some(&end) {
                            ends.push(end);
                        }
                        at = end + 1;
                    } else {
                        ends.push(end);
                        at = end;
                    }
                }
                Ok(None) => break,
                Err(_) => {
                    let mut cache = self.pike_caches.get();
                    return self
                        .pike
                        .find_iter(&mut cache, hay)
                        .map(|m| m.end())
                        .collect();
                }
            }
        }
        ends
    }

    /// Which patterns match anywhere in `hay`, by pattern index.
    pub fn which(&self, hay: &[u8]) -> PatternSet {
        debug_assert_eq!(self.kind, Kind::Which);
        let mut set = PatternSet::new(self.patterns);
        let input = Input::new(hay);
        if self
            .dfa
            .try_which_overlapping_matches(&mut self.dfa_caches.get(), &input, &mut set)
            .is_err()
        {
            set.clear();
            self.pike
                .which_overlapping_matches(&mut self.pike_caches.get(), &input, &mut set);
        }
        set
    }

    /// Whether some capture group (not the whole match) of some match of
    /// the pattern in `hay` satisfies `check` (given its place in `hay`, so
    /// a check may read around it).
    pub fn any_group(&self, hay: &[u8], check: impl Fn(std::ops::Range<usize>) -> bool) -> bool {
        debug_assert_eq!(self.kind, Kind::Captures);
        // The lazy DFA rules out most strings before the slower PikeVM runs.
        if !self.is_match(hay) {
            return false;
        }
        let mut cache = self.pike_caches.get();
        self.pike.captures_iter(&mut cache, hay).any(|caps| {
            (1..caps.group_len())
                .filter_map(|g| caps.get_group(g))
                .any(|span| check(span.range()))
        })
    }
}
