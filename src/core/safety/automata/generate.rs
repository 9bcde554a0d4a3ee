//! Builds `rules.bin` from the rule table (natively, in tests) and proves the
//! embedded copy is exactly that.

use super::{codec, Automaton, Kind, Source, ENTRY, MAGIC, TABLE};
use regex_automata::nfa::thompson::{self, WhichCaptures, NFA};
use regex_automata::util::syntax;

/// Compiles a source the way the scanner's patterns are written:
/// `regex::bytes` semantics with Unicode mode off (ASCII `\b`, `\s`, `(?i)`;
/// non-ASCII literals match their UTF-8 bytes; `.` and negated classes match
/// any byte).
pub(super) fn compile(source: &Source) -> NFA {
    let captures = match source.kind {
        Kind::Captures => WhichCaptures::All,
        Kind::Which | Kind::Match => WhichCaptures::None,
    };
    thompson::Compiler::new()
        .syntax(syntax::Config::new().unicode(false).utf8(false))
        .configure(thompson::Config::new().utf8(false).which_captures(captures))
        .build_many(&source.patterns)
        .unwrap_or_else(|e| panic!("{source:?} compiles: {e}"))
}

/// The table for `sources`: see `super::TABLE` for the layout.
pub(super) fn table(sources: &[Source]) -> Vec<u8> {
    let mut entries: Vec<(u64, Vec<u8>)> = sources
        .iter()
        .map(|s| (s.key(), codec::encode(&compile(s)).expect("encodable NFA")))
        .collect();
    entries.sort_by_key(|e| e.0);
    entries.dedup_by_key(|e| e.0);
    let mut out = MAGIC.to_vec();
    out.extend((entries.len() as u32).to_le_bytes());
    let mut at = out.len() + entries.len() * ENTRY;
    for (key, nfa) in &entries {
        out.extend(key.to_le_bytes());
        out.extend((at as u32).to_le_bytes());
        out.extend((nfa.len() as u32).to_le_bytes());
        at += nfa.len();
    }
    for (_, nfa) in entries {
        out.extend(nfa);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::safety::engine;

    #[test]
    fn rules_bin_is_what_the_rule_table_compiles_to() {
        let fresh = table(&engine::sources());
        crate::core::safety::check_generated("src/core/safety/automata/rules.bin", &fresh, TABLE);
    }

    #[test]
    fn every_source_decodes_to_the_nfa_it_was_compiled_to() {
        for source in engine::sources() {
            let nfa = compile(&source);
            let bytes = codec::encode(&nfa).unwrap();
            let (back, used) = codec::decode(&bytes).unwrap();
            assert_eq!(used, bytes.len());
            // NFA's Debug lists every state, the starts and the flags.
            assert_eq!(format!("{nfa:?}"), format!("{back:?}"), "{source:?}");
            assert_eq!(
                nfa.group_info().all_group_len(),
                back.group_info().all_group_len()
            );
            let _ = Automaton::load(&source);
        }
    }

    #[test]
    fn a_source_not_in_the_table_is_refused() {
        let edited = Source::new(Kind::Match, vec!["an edited rule".into()]);
        assert!(std::panic::catch_unwind(|| Automaton::load(&edited)).is_err());
    }

    #[test]
    fn corrupt_bytes_are_an_error_not_a_panic() {
        let nfa = compile(&Source::new(
            Kind::Captures,
            vec![r"(?i)key=([a-z]+)".into()],
        ));
        let bytes = codec::encode(&nfa).unwrap();
        for cut in 0..bytes.len() {
            assert!(codec::decode(&bytes[..cut]).is_err());
        }
        let mut flipped = bytes.clone();
        flipped[0] ^= 0xff;
        assert!(codec::decode(&flipped).is_err());
    }
}
