//! Runs the rule table over the views of one string.
//!
//! One multi-pattern automaton per view answers "which rules match
//! anywhere" in a single linear pass (one regex per rule was measured 4x
//! slower: 90 passes over the text). Rules with a value check additionally
//! get a capturing automaton, run only when the set says the rule matched.
//! Rules with keywords (most vendor formats) stay out of the sets: one
//! keyword pass finds which keywords a string holds, and only those rules'
//! automata run, so a hundred vendor formats cost a string without any of
//! their prefixes one linear scan, and they do not multiply the sets'
//! automata. Structural rules (`Matcher::Detect`) are plain functions.
//!
//! Every regex automaton comes compiled from `super::automata` (built at
//! build time, rebuilt from its states on first use): nothing here compiles
//! a regex, and nothing is touched until the first string is scanned. The
//! keyword pass is plain literals, so it is an Aho-Corasick automaton built
//! from them on first use (~3.6 KB of keywords, tens of microseconds): a
//! lazy DFA over the same literals, searched for every overlapping match,
//! built most of a fresh isolate's first-scan states (over half of its first
//! write check's instructions), and full DFAs of them are megabytes.

use super::automata::{Automaton, Kind, Source};
use super::normalize::Views;
use super::rules::{self, Check, Matcher, Rule, View};
use aho_corasick::AhoCorasick;
use std::sync::OnceLock;

const VIEWS: [View; 3] = [View::Raw, View::Lower, View::Squeezed];

struct ViewSet {
    view: View,
    set: Automaton,
    /// `rules[i]` is the rule of the set's pattern `i`; `checks[i]` its
    /// capturing automaton when the rule has a value check.
    rules: Vec<&'static Rule>,
    checks: Vec<Option<Automaton>>,
}

/// The rules of `view` that run on every string (no keywords).
fn set_rules(view: View) -> impl Iterator<Item = &'static Rule> {
    rules::all().filter(move |rule| {
        matches!(rule.matcher, Matcher::Pattern { view: v, keywords: [], .. } if v == view)
    })
}

fn regex_of(rule: &Rule) -> &'static str {
    match rule.matcher {
        Matcher::Pattern { regex, .. } => regex,
        Matcher::Detect(_) => "",
    }
}

fn set_source(view: View) -> Source {
    let patterns = set_rules(view).map(|r| regex_of(r).to_string()).collect();
    Source::new(Kind::Which, patterns)
}

fn one(kind: Kind, regex: &str) -> Source {
    Source::new(kind, vec![regex.to_string()])
}

/// Whether the rule's matches are confirmed by a check of their captures
/// (so it needs a capturing automaton).
fn is_checked(rule: &Rule) -> bool {
    !matches!(
        rule.matcher,
        Matcher::Pattern {
            check: Check::None,
            ..
        } | Matcher::Detect(_)
    )
}

/// The check of a pattern rule (`Check::None` for a structural one).
fn check_of(rule: &Rule) -> Check {
    match rule.matcher {
        Matcher::Pattern { check, .. } => check,
        Matcher::Detect(_) => Check::None,
    }
}

fn sets() -> &'static [ViewSet] {
    static SETS: OnceLock<Vec<ViewSet>> = OnceLock::new();
    SETS.get_or_init(|| {
        VIEWS
            .iter()
            .map(|&view| {
                let rules: Vec<&'static Rule> = set_rules(view).collect();
                let checks = rules
                    .iter()
                    .map(|r| {
                        is_checked(r).then(|| Automaton::load(&one(Kind::Captures, regex_of(r))))
                    })
                    .collect();
                ViewSet {
                    view,
                    set: Automaton::load(&set_source(view)),
                    rules,
                    checks,
                }
            })
            .collect()
    })
}

/// A rule that runs only where one of its keywords occurs; its automaton
/// is loaded the first time one does.
struct Keyed {
    rule: &'static Rule,
    automaton: OnceLock<Automaton>,
    /// The rule's second literals (`Matcher::Pattern::also`), if any, as
    /// one automaton built the first time a keyword wakes the rule.
    also: OnceLock<AhoCorasick>,
}

impl Keyed {
    /// Whether the rule's view holds one of its second literals (true when
    /// it has none). The rule's automata build lazy DFA states for every
    /// new text they read, the costliest part of a scan of unseen text;
    /// this is one pass over literals.
    fn also_holds(&self, hay: &[u8]) -> bool {
        let Matcher::Pattern { also, .. } = self.rule.matcher else {
            return true;
        };
        if also.is_empty() {
            return true;
        }
        self.also
            .get_or_init(|| {
                AhoCorasick::builder()
                    .ascii_case_insensitive(true)
                    .build(also)
                    .expect("literal automaton from a few words")
            })
            .is_match(hay)
    }
}

struct Keywords {
    words: KeywordSet,
    rules: Vec<Keyed>,
}

/// Every keyword in one automaton, ASCII letters in any case (what `(?i)`
/// means with Unicode off, as the rules are written). Keywords of
/// case-sensitive rules (vendor prefixes on the raw view, "AKIA", "AAAA")
/// count only where they occur exactly, so "sha256:aaaa…" wakes no rule:
/// one pass over the text instead of one per case (the keyword pass was
/// the largest cost of a scan of text already seen).
struct KeywordSet {
    automaton: AhoCorasick,
    /// Keyword index -> index in `Keywords::rules`.
    owner: Vec<usize>,
    /// Keyword index -> the keyword, if it is matched exactly.
    exact: Vec<Option<&'static str>>,
}

impl KeywordSet {
    /// `exact.0[i]` matched as written and `any_case.0[i]` in any ASCII
    /// case; `.1[i]` is the rule of each.
    fn new(exact: &KeywordList, any_case: &KeywordList) -> KeywordSet {
        let words: Vec<&'static str> = exact.0.iter().chain(&any_case.0).copied().collect();
        let automaton = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(&words)
            .expect("keyword automaton from a few KB of literals");
        KeywordSet {
            automaton,
            owner: exact.1.iter().chain(&any_case.1).copied().collect(),
            exact: (exact.0.iter().map(|&w| Some(w)))
                .chain(any_case.0.iter().map(|_| None))
                .collect(),
        }
    }

    /// Marks the rules whose keywords occur in `hay`.
    fn mark(&self, hay: &[u8], candidates: &mut [bool]) {
        // Overlapping: every keyword occurrence, so "…secret=" wakes the
        // rules of both "secret" and "secret=".
        for found in self.automaton.find_overlapping_iter(hay) {
            let i = found.pattern().as_usize();
            if let Some(Some(word)) = self.exact.get(i) {
                if hay.get(found.range()) != Some(word.as_bytes()) {
                    continue;
                }
            }
            if let Some(&rule) = self.owner.get(i) {
                candidates[rule] = true;
            }
        }
    }
}

/// Keywords, and the index in `KeywordPlan::rules` of each one's rule.
type KeywordList = (Vec<&'static str>, Vec<usize>);

/// The keyword-gated rules, and their keywords split by case sensitivity:
/// `(keywords, index of each keyword's rule in rules)`.
struct KeywordPlan {
    rules: Vec<&'static Rule>,
    exact: KeywordList,
    any_case: KeywordList,
}

fn keyword_plan() -> KeywordPlan {
    let mut plan = KeywordPlan {
        rules: Vec::new(),
        exact: (Vec::new(), Vec::new()),
        any_case: (Vec::new(), Vec::new()),
    };
    for rule in rules::all() {
        if let Matcher::Pattern {
            view,
            keywords,
            regex,
            ..
        } = rule.matcher
        {
            if keywords.is_empty() {
                continue;
            }
            let case_sensitive = view == View::Raw && !regex.contains("(?i");
            for w in keywords {
                let (words, owners) = if case_sensitive {
                    &mut plan.exact
                } else {
                    &mut plan.any_case
                };
                words.push(*w);
                owners.push(plan.rules.len());
            }
            plan.rules.push(rule);
        }
    }
    plan
}

fn keywords() -> &'static Keywords {
    static KEYWORDS: OnceLock<Keywords> = OnceLock::new();
    KEYWORDS.get_or_init(|| {
        let plan = keyword_plan();
        Keywords {
            words: KeywordSet::new(&plan.exact, &plan.any_case),
            rules: plan
                .rules
                .into_iter()
                .map(|rule| Keyed {
                    rule,
                    automaton: OnceLock::new(),
                    also: OnceLock::new(),
                })
                .collect(),
        }
    })
}

/// The automaton a keyword-gated rule runs: match-only, or with capture
/// groups when the rule checks a captured value.
fn keyed_source(rule: &Rule) -> Source {
    let kind = if is_checked(rule) {
        Kind::Captures
    } else {
        Kind::Match
    };
    one(kind, regex_of(rule))
}

/// Every automaton the scanner loads, for `automata::generate` (which
/// compiles them into `rules.bin`).
#[cfg(test)]
pub(super) fn sources() -> Vec<Source> {
    let mut all: Vec<Source> = VIEWS.iter().map(|&v| set_source(v)).collect();
    for view in VIEWS {
        all.extend(
            set_rules(view)
                .filter(|r| is_checked(r))
                .map(|r| one(Kind::Captures, regex_of(r))),
        );
    }
    all.extend(keyword_plan().rules.iter().map(|r| keyed_source(r)));
    all.extend(rules::automata_sources());
    all
}

type Detector = (&'static Rule, fn(&Views) -> bool);

fn detectors() -> &'static [Detector] {
    static DETECTORS: OnceLock<Vec<Detector>> = OnceLock::new();
    DETECTORS.get_or_init(|| {
        rules::all()
            .filter_map(|r| match r.matcher {
                Matcher::Detect(f) => Some((r, f)),
                Matcher::Pattern { .. } => None,
            })
            .collect()
    })
}

fn text<'a>(views: &'a Views<'_>, view: View) -> &'a [u8] {
    match view {
        View::Raw => views.raw.as_bytes(),
        View::Lower => views.lower.as_bytes(),
        View::Squeezed => views.squeezed.as_bytes(),
    }
}

/// Calls `hit` for every rule that matches (and passes its check). A rule
/// name may be reported more than once; the caller de-duplicates.
pub(super) fn for_each_hit(views: &Views, mut hit: impl FnMut(&'static Rule)) {
    for vs in sets() {
        let hay = text(views, vs.view);
        if hay.is_empty() {
            continue;
        }
        for i in vs.set.which(hay).iter() {
            let i = i.as_usize();
            let confirmed = match vs.checks.get(i) {
                Some(Some(captures)) => match vs.rules.get(i) {
                    Some(rule) => check_captured(check_of(rule), captures, hay),
                    None => false,
                },
                _ => true,
            };
            if let (true, Some(&rule)) = (confirmed, vs.rules.get(i)) {
                hit(rule);
            }
        }
    }
    let kw = keywords();
    let mut candidates = vec![false; kw.rules.len()];
    kw.words.mark(views.raw.as_bytes(), &mut candidates);
    for (keyed, _) in kw.rules.iter().zip(&candidates).filter(|(_, &c)| c) {
        let Matcher::Pattern { view, check, .. } = keyed.rule.matcher else {
            continue;
        };
        let hay = text(views, view);
        if !keyed.also_holds(hay) {
            continue;
        }
        let automaton = keyed
            .automaton
            .get_or_init(|| Automaton::load(&keyed_source(keyed.rule)));
        let found = match check {
            Check::None => automaton.is_match(hay),
            check => check_captured(check, automaton, hay),
        };
        if found {
            hit(keyed.rule);
        }
    }
    for &(rule, detect) in detectors() {
        if detect(views) {
            hit(rule);
        }
    }
}

/// Some capture group of some match passes the rule's check.
fn check_captured(check: Check, captures: &Automaton, hay: &[u8]) -> bool {
    // Where nothing could make the check reject a match, whether there is
    // one is enough: the lazy DFA answers it, not the slower capturing
    // search.
    if !check.may_reject(hay) {
        return captures.is_match(hay);
    }
    captures.any_group(hay, |at| check.confirms_in(hay, at))
}

/// Loads the always-run automata now instead of on the first scan (for the
/// cold-start measurement).
pub(super) fn warm_up() {
    let _ = sets();
    let _ = keywords();
    let _ = detectors();
}

/// The loaded automata (and the literal automata of the keywords and the
/// credential labels) answer exactly what the `regex` crate answers for the
/// same patterns: the engine the scanner compiled at start-up before, on
/// every text of the safety corpora and every rule example, in every view.
#[cfg(test)]
mod same_as_the_regex_crate {
    use super::*;
    use crate::core::safety::automata;
    use regex::bytes::{Regex, RegexBuilder, RegexSetBuilder};

    fn texts() -> Vec<String> {
        let mut out = Vec::new();
        for file in [
            include_str!("../../../tests/corpus/public/unsafe.tsv"),
            include_str!("../../../tests/corpus/public/benign.tsv"),
            include_str!("../../../tests/corpus/malicious.txt"),
            include_str!("../../../tests/corpus/benign.txt"),
        ] {
            for line in file.lines().filter(|l| !l.starts_with('#')) {
                out.extend(line.split('\t').map(str::to_string));
            }
        }
        for rule in rules::all() {
            out.extend(rule.hits.iter().chain(rule.misses).map(|s| s.to_string()));
        }
        out
    }

    fn which(automaton: &Automaton, hay: &[u8]) -> Vec<usize> {
        automaton.which(hay).iter().map(|p| p.as_usize()).collect()
    }

    fn regex(p: &str) -> Regex {
        RegexBuilder::new(p).unicode(false).build().unwrap()
    }

    fn captured(check: Check, re: &Regex, hay: &[u8]) -> bool {
        re.captures_iter(hay).any(|caps| {
            caps.iter()
                .skip(1)
                .flatten()
                .any(|m| check.confirms_in(hay, m.range()))
        })
    }

    #[test]
    fn on_every_corpus_text_and_rule_example() {
        let texts = texts();
        assert!(texts.len() > 1500, "{} texts", texts.len());
        let keyed: Vec<(&Keyed, Regex)> = keywords()
            .rules
            .iter()
            .map(|k| (k, regex(regex_of(k.rule))))
            .collect();
        let plan = keyword_plan();
        // The keyword sets as the regex sets they were before (escaped
        // literals, the any-case ones under `(?i)`).
        let keyword_set = |words: &[&str], flags: &str| {
            let patterns: Vec<String> = words
                .iter()
                .map(|w| format!("{flags}{}", automata::escape(w)))
                .collect();
            RegexSetBuilder::new(&patterns)
                .unicode(false)
                .build()
                .unwrap()
        };
        let exact = keyword_set(&plan.exact.0, "");
        let any = keyword_set(&plan.any_case.0, "(?i)");
        let labels = regex(&crate::core::safety::rules::hex_key_label_pattern());
        let label_sets: Vec<Regex> = rules::LABELS
            .iter()
            .map(|l| regex(&rules::labels_pattern(l)))
            .collect();
        let view_sets: Vec<_> = sets()
            .iter()
            .map(|vs| {
                let patterns: Vec<&str> = vs.rules.iter().map(|r| regex_of(r)).collect();
                (
                    vs,
                    RegexSetBuilder::new(&patterns)
                        .unicode(false)
                        .build()
                        .unwrap(),
                )
            })
            .collect();
        let mut compared = 0usize;
        for text in &texts {
            let views = crate::core::safety::normalize::views(text);
            for (vs, set) in &view_sets {
                let hay = super::text(&views, vs.view);
                assert_eq!(
                    set.matches(hay).iter().collect::<Vec<_>>(),
                    which(&vs.set, hay),
                    "{:?} set on {text:?}",
                    vs.view
                );
            }
            let raw = views.raw.as_bytes();
            let kw = keywords();
            let mut want = vec![false; kw.rules.len()];
            for (set, owners) in [(&exact, &plan.exact.1), (&any, &plan.any_case.1)] {
                for i in set.matches(raw).iter() {
                    want[owners[i]] = true;
                }
            }
            let mut got = vec![false; kw.rules.len()];
            kw.words.mark(raw, &mut got);
            assert_eq!(want, got, "keywords on {text:?}");
            for (k, re) in &keyed {
                let Matcher::Pattern { view, check, .. } = k.rule.matcher else {
                    continue;
                };
                let hay = super::text(&views, view);
                let automaton = k
                    .automaton
                    .get_or_init(|| Automaton::load(&keyed_source(k.rule)));
                let (want, got) = match check {
                    Check::None => (re.is_match(hay), automaton.is_match(hay)),
                    check => (
                        captured(check, re, hay),
                        check_captured(check, automaton, hay),
                    ),
                };
                assert_eq!(want, got, "{} on {text:?}", k.rule.name);
                // The second literals never skip a text the rule matches.
                assert!(
                    !re.is_match(hay) || k.also_holds(hay),
                    "{} matches {text:?} without its second literals",
                    k.rule.name
                );
                compared += 1;
            }
            let lower = views.lower.as_bytes();
            let want: Vec<usize> = labels.find_iter(lower).map(|m| m.end()).collect();
            assert_eq!(
                want,
                crate::core::safety::rules::hex_key_label_ends(lower),
                "labels on {text:?}"
            );
            let want = [label_sets[0].is_match(lower), label_sets[1].is_match(lower)];
            assert_eq!(
                want,
                rules::label_hits(lower),
                "credential labels on {text:?}"
            );
        }
        assert!(compared > 100_000, "{compared}");
    }
}
