//! The lexicon's language files: the hand-written sources of the generated
//! `../table.rs` (`../generate.rs` compiles their terms into it), one file
//! per language, each with the examples its tests below run. Only tests
//! compile them: the binary carries the generated table, not these.
//!
//! A language file holds `TERMS` (`(term, categories)` pairs, see the
//! parent module for how terms are written), `HITS` (`(rule, text)`: the
//! text must be flagged by that rule) and `MISSES` (texts that must stay
//! clean). To add a language: write its file, add it to [`all`], and run
//! `npm run regen` (docs/GENERATED.md).
//!
//! Forty languages have a file each (Serbo-Croatian is one file, in Latin
//! and Cyrillic letters). Transliterations have their own files, because
//! their words are Latin and share the table with every Latin-script
//! language, so they need their own care about collisions: `hi_latn`
//! (Hinglish and Roman Urdu, one spoken vocabulary typed in Latin letters)
//! and `ar_latn` (Arabizi, Arabic in Latin letters and digits). The table is
//! shared: a word listed in two files gets both files' categories, and an
//! exact word hides another file's stem that it starts ("отключи" in
//! Bulgarian would hide Russian "отключи*"), so the tests of every language
//! run together.

// The categories, for `use super::cat::*` in each language file.
use super::cat;

mod ar;
mod ar_latn;
mod bg;
mod bn;
mod cs;
mod da;
mod de;
mod el;
mod en;
mod es;
mod fa;
mod fi;
mod fr;
mod he;
mod hi;
mod hi_latn;
mod hu;
mod id;
mod it;
mod ja;
mod ko;
mod mr;
mod ms;
mod nb;
mod nl;
mod pl;
mod pt;
mod ro;
mod ru;
mod sk;
mod sr;
mod sv;
mod sw;
mod ta;
mod te;
mod th;
mod tl;
mod tr;
mod uk;
mod ur;
mod vi;
mod zh;

/// One language: its terms, and texts that must be flagged by a named rule
/// and texts that must stay clean.
pub(super) struct Language {
    pub code: &'static str,
    pub terms: &'static [(&'static str, u64)],
    pub hits: &'static [(&'static str, &'static str)],
    pub misses: &'static [&'static str],
}

macro_rules! language {
    ($m:ident) => {
        Language {
            code: stringify!($m),
            terms: $m::TERMS,
            hits: $m::HITS,
            misses: $m::MISSES,
        }
    };
}

/// Every language, in the order `generate` adds their terms to the table
/// (the order breaks ties between equally long unspaced terms).
pub(super) fn all() -> [Language; 42] {
    [
        language!(en),
        language!(es),
        language!(de),
        language!(fr),
        language!(pt),
        language!(it),
        language!(nl),
        language!(pl),
        language!(ru),
        language!(tr),
        language!(zh),
        language!(ja),
        language!(ko),
        language!(ar),
        language!(hi),
        language!(fa),
        language!(vi),
        language!(id),
        language!(sw),
        language!(th),
        language!(he),
        language!(el),
        language!(uk),
        language!(bn),
        language!(ta),
        language!(ur),
        language!(hi_latn),
        language!(ar_latn),
        language!(ms),
        language!(tl),
        language!(cs),
        language!(ro),
        language!(hu),
        language!(sv),
        language!(da),
        language!(nb),
        language!(fi),
        language!(sk),
        language!(bg),
        language!(sr),
        language!(te),
        language!(mr),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_language_has_terms_in_the_core_categories() {
        for lang in all() {
            for need in [
                cat::IGNORE,
                cat::INSTR,
                cat::PRIOR,
                cat::REVEAL,
                cat::AI,
                cat::NEW,
            ] {
                assert!(
                    lang.terms.iter().any(|(_, c)| c & need != 0),
                    "{} lacks category {need:#x}",
                    lang.code
                );
            }
        }
    }

    /// Each language's own examples, scanned as an objective title: hits are
    /// flagged by the named rule, misses produce no finding at all.
    #[test]
    fn every_language_flags_its_hits_and_not_its_misses() {
        use crate::core::json::Json;
        let mut failures = Vec::new();
        for lang in all() {
            if lang.hits.len() < 15 || lang.misses.len() < 15 {
                failures.push(format!(
                    "{}: needs at least 15 hits and 15 misses",
                    lang.code
                ));
            }
            let title = |text: &str| {
                let capsule = Json::Object(vec![(
                    "objectives".into(),
                    Json::Array(vec![Json::Object(vec![("title".into(), Json::from(text))])]),
                )]);
                crate::core::safety::scan(&capsule)
            };
            for (rule, text) in lang.hits {
                let found = title(text);
                if !found.iter().any(|f| f.rule == *rule) {
                    let got: Vec<_> = found.iter().map(|f| f.rule).collect();
                    failures.push(format!(
                        "{}: {rule} misses {text:?} (got {got:?})",
                        lang.code
                    ));
                }
            }
            for text in lang.misses {
                let found = title(text);
                if !found.is_empty() {
                    let got: Vec<_> = found.iter().map(|f| f.rule).collect();
                    failures.push(format!("{}: flags {text:?} ({got:?})", lang.code));
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
