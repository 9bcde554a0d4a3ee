//! Compiles the rule table once and runs it over the views of one string.
//!
//! One `RegexSet` per view keeps the number of automata at three: a set
//! answers "which rules match anywhere" in a single linear pass, and a cheap
//! `is_match` pass first means clean strings (nearly all of them) never pay
//! for the which-rules bookkeeping. Rules with a value check additionally get
//! a capturing regex, compiled only the first time such a rule fires.

use super::credential::looks_like_credential;
use super::normalize::Views;
use super::rules::{Check, Rule, View, RULES};
use regex::bytes::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};
use std::sync::OnceLock;

struct ViewSet {
    view: View,
    set: RegexSet,
    /// `rules[i]` is the index in [`RULES`] of the set's pattern `i`.
    rules: Vec<usize>,
}

const VIEWS: [View; 3] = [View::Raw, View::Lower, View::Squeezed];

fn sets() -> &'static [ViewSet] {
    static SETS: OnceLock<Vec<ViewSet>> = OnceLock::new();
    SETS.get_or_init(|| {
        VIEWS
            .iter()
            .map(|&view| {
                let rules: Vec<usize> = (0..RULES.len())
                    .filter(|&i| RULES[i].view == view)
                    .collect();
                let set = RegexSetBuilder::new(rules.iter().map(|&i| RULES[i].pattern))
                    .unicode(false)
                    .build()
                    // The patterns are constants covered by unit tests; a
                    // failure here is a build defect, and failing closed (a
                    // panic, so the write is not accepted) beats scanning
                    // with no rules.
                    .expect("safety rule patterns compile");
                ViewSet { view, set, rules }
            })
            .collect()
    })
}

/// Capturing regexes for the rules that need a value check, by rule index.
fn checkers() -> &'static [(usize, Regex)] {
    static CHECKERS: OnceLock<Vec<(usize, Regex)>> = OnceLock::new();
    CHECKERS.get_or_init(|| {
        RULES
            .iter()
            .enumerate()
            .filter(|(_, r)| r.check != Check::None)
            .map(|(i, r)| {
                let re = RegexBuilder::new(r.pattern)
                    .unicode(false)
                    .build()
                    .expect("safety rule patterns compile");
                (i, re)
            })
            .collect()
    })
}

fn text(views: &Views, view: View) -> &[u8] {
    match view {
        View::Raw => views.raw.as_bytes(),
        View::Lower => views.lower.as_bytes(),
        View::Squeezed => views.squeezed.as_bytes(),
    }
}

/// Calls `hit` for every rule that matches (and passes its check). A rule
/// may be reported more than once; the caller de-duplicates.
pub(super) fn for_each_hit(views: &Views, mut hit: impl FnMut(&'static Rule)) {
    for vs in sets() {
        let hay = text(views, vs.view);
        if hay.is_empty() || !vs.set.is_match(hay) {
            continue;
        }
        for i in vs.set.matches(hay).iter() {
            let Some(&index) = vs.rules.get(i) else {
                continue;
            };
            let Some(rule) = RULES.get(index) else {
                continue;
            };
            if confirmed(index, rule, hay) {
                hit(rule);
            }
        }
    }
}

fn confirmed(index: usize, rule: &Rule, hay: &[u8]) -> bool {
    match rule.check {
        Check::None => true,
        Check::CredentialValue => {
            let Some((_, re)) = checkers().iter().find(|(i, _)| *i == index) else {
                return true;
            };
            re.captures_iter(hay).any(|caps| {
                caps.iter()
                    .skip(1)
                    .flatten()
                    .any(|m| looks_like_credential(m.as_bytes()))
            })
        }
    }
}

/// Forces compilation (for warm-up and the compile-cost measurement).
pub(super) fn warm_up() {
    let _ = sets();
    let _ = checkers();
}
