//! A compact byte encoding of a Thompson NFA, and its exact inverse.
//!
//! regex-automata can serialise DFAs but not NFAs, and full DFAs of this rule
//! table do not fit a Worker (tens of MB: counted repetitions such as
//! `[A-Za-z0-9]{32}` in an unanchored search multiply states). An NFA is
//! linear in its pattern, so the rule table's NFAs are compiled natively,
//! encoded here, embedded in the binary, and rebuilt at first use through
//! regex-automata's own `thompson::Builder`: no parsing, no translation, no
//! compilation, just the states put back in order. `decode(encode(nfa))`
//! has the same states, starts, captures and flags as `nfa` (tested).
//!
//! Format: a header (flags, line terminator, state count, pattern count,
//! start states, per-pattern starts), then one record per state: a tag byte
//! and LEB128 integers; transition targets are written relative to their
//! state (zigzag), as most point a few states on. State IDs are kept as they
//! are: the builder hands out IDs in insertion order, and no state added
//! here is an empty one it would drop.

#[cfg(test)]
use regex_automata::nfa::thompson::State;
use regex_automata::nfa::thompson::{Builder, Transition, NFA};
use regex_automata::util::look::{Look, LookMatcher};
use regex_automata::util::primitives::StateID;

/// Why bytes did not decode: only possible if the embedded bytes were not
/// written by `encode` of this regex-automata version.
pub type DecodeError = &'static str;

const MAGIC: &[u8; 4] = b"NFA1";

const T_RANGE: u8 = 1;
const T_SPARSE: u8 = 2;
const T_LOOK: u8 = 3;
const T_UNION: u8 = 4;
const T_CAPTURE: u8 = 5;
const T_FAIL: u8 = 6;
const T_MATCH: u8 = 7;

#[cfg(test)]
fn put(out: &mut Vec<u8>, mut v: u32) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// A transition's target, relative to the state it leaves (most point a few
/// states on, so the difference is one byte), zigzag-encoded.
#[cfg(test)]
fn link(out: &mut Vec<u8>, from: usize, to: usize) {
    let delta = to as i64 - from as i64;
    put(out, ((delta << 1) ^ (delta >> 63)) as u32);
}

/// Encodes `nfa` (one built by `thompson::Compiler`; dense states, which the
/// compiler never makes, are refused).
#[cfg(test)]
pub fn encode(nfa: &NFA) -> Result<Vec<u8>, &'static str> {
    let mut out = MAGIC.to_vec();
    out.push(u8::from(nfa.is_utf8()) | u8::from(nfa.is_reverse()) << 1);
    out.push(nfa.look_matcher().get_line_terminator());
    put(&mut out, nfa.states().len() as u32);
    put(&mut out, nfa.pattern_len() as u32);
    put(&mut out, nfa.start_anchored().as_u32());
    put(&mut out, nfa.start_unanchored().as_u32());
    for pid in nfa.patterns() {
        put(&mut out, nfa.start_pattern(pid).map_or(0, |s| s.as_u32()));
    }
    for (sid, state) in nfa.states().iter().enumerate() {
        match state {
            State::ByteRange { trans } => {
                out.extend([T_RANGE, trans.start, trans.end]);
                link(&mut out, sid, trans.next.as_usize());
            }
            State::Sparse(sparse) => {
                out.push(T_SPARSE);
                put(&mut out, sparse.transitions.len() as u32);
                for t in sparse.transitions.iter() {
                    out.extend([t.start, t.end]);
                    link(&mut out, sid, t.next.as_usize());
                }
            }
            State::Dense(_) => return Err("dense NFA states are not encoded"),
            State::Look { look, next } => {
                out.push(T_LOOK);
                put(&mut out, look.as_repr());
                link(&mut out, sid, next.as_usize());
            }
            State::Union { alternates } => {
                out.push(T_UNION);
                put(&mut out, alternates.len() as u32);
                for a in alternates.iter() {
                    link(&mut out, sid, a.as_usize());
                }
            }
            State::BinaryUnion { alt1, alt2 } => {
                out.push(T_UNION);
                put(&mut out, 2);
                link(&mut out, sid, alt1.as_usize());
                link(&mut out, sid, alt2.as_usize());
            }
            State::Capture {
                next,
                pattern_id,
                group_index,
                slot,
            } => {
                if nfa
                    .group_info()
                    .to_name(*pattern_id, group_index.as_usize())
                    .is_some()
                {
                    return Err("named capture groups are not encoded");
                }
                out.push(T_CAPTURE);
                put(&mut out, pattern_id.as_u32());
                put(&mut out, group_index.as_u32());
                // Even slots open a group, odd ones close it.
                out.push((slot.as_usize() % 2) as u8);
                link(&mut out, sid, next.as_usize());
            }
            State::Fail => out.push(T_FAIL),
            State::Match { pattern_id } => {
                out.push(T_MATCH);
                put(&mut out, pattern_id.as_u32());
            }
        }
    }
    Ok(out)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    /// The number of states: every state ID read must be below it (the
    /// builder indexes by them).
    states: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, DecodeError> {
        let b = *self.bytes.get(self.at).ok_or("truncated")?;
        self.at += 1;
        Ok(b)
    }

    fn int(&mut self) -> Result<u32, DecodeError> {
        let mut v: u32 = 0;
        for shift in (0..35).step_by(7) {
            let b = self.byte()?;
            v |= u32::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("integer too long")
    }

    /// A target written by `link` from state `from`.
    fn link(&mut self, from: usize) -> Result<StateID, DecodeError> {
        let z = i64::from(self.int()?);
        let delta = (z >> 1) ^ -(z & 1);
        let to = usize::try_from(from as i64 + delta).map_err(|_| "link out of range")?;
        self.check(to)
    }

    fn state(&mut self) -> Result<StateID, DecodeError> {
        let id = self.int()? as usize;
        self.check(id)
    }

    fn check(&self, id: usize) -> Result<StateID, DecodeError> {
        if id >= self.states {
            return Err("state id out of range");
        }
        StateID::new(id).map_err(|_| "state id")
    }
}

fn err<E>(what: &'static str) -> impl FnOnce(E) -> DecodeError {
    move |_| what
}

/// The builder's pattern bookkeeping. A pattern is opened when its first
/// capture or match state comes (those are the states the builder tags with
/// the open pattern); the states between belong to it or to none.
struct Patterns {
    starts: Vec<StateID>,
    open: Option<usize>,
    next: usize,
}

impl Patterns {
    fn enter(&mut self, b: &mut Builder, pid: usize) -> Result<(), DecodeError> {
        while self.open != Some(pid) {
            if self.next > pid || self.next >= self.starts.len() {
                return Err("pattern order");
            }
            self.close(b)?;
            b.start_pattern().map_err(err("start pattern"))?;
            self.open = Some(self.next);
            self.next += 1;
        }
        Ok(())
    }

    fn close(&mut self, b: &mut Builder) -> Result<(), DecodeError> {
        if let Some(p) = self.open.take() {
            b.finish_pattern(self.starts[p])
                .map_err(err("finish pattern"))?;
        }
        Ok(())
    }
}

/// Rebuilds the NFA `encode` wrote. Returns the NFA and the bytes it used,
/// so several can be concatenated.
pub fn decode(bytes: &[u8]) -> Result<(NFA, usize), DecodeError> {
    let mut r = Reader {
        bytes,
        at: 0,
        states: 0,
    };
    if bytes.get(..4) != Some(MAGIC) {
        return Err("not an encoded NFA");
    }
    r.at = 4;
    let flags = r.byte()?;
    let line_terminator = r.byte()?;
    let count = r.int()? as usize;
    r.states = count;
    let patterns = r.int()? as usize;
    if patterns > count {
        return Err("more patterns than states");
    }
    let start_anchored = r.state()?;
    let start_unanchored = r.state()?;
    let mut pattern_starts = Vec::with_capacity(patterns.min(256));
    for _ in 0..patterns {
        pattern_starts.push(r.state()?);
    }
    let mut b = Builder::new();
    b.set_utf8(flags & 1 != 0);
    b.set_reverse(flags & 2 != 0);
    let mut looks = LookMatcher::new();
    looks.set_line_terminator(line_terminator);
    b.set_look_matcher(looks);
    let mut patterns_open = Patterns {
        starts: pattern_starts,
        open: None,
        next: 0,
    };
    for i in 0..count {
        let id = match r.byte()? {
            T_RANGE => {
                let (start, end) = (r.byte()?, r.byte()?);
                let next = r.link(i)?;
                b.add_range(Transition { start, end, next })
            }
            T_SPARSE => {
                let n = r.int()? as usize;
                let mut ts = Vec::with_capacity(n.min(256));
                for _ in 0..n {
                    let (start, end) = (r.byte()?, r.byte()?);
                    ts.push(Transition {
                        start,
                        end,
                        next: r.link(i)?,
                    });
                }
                b.add_sparse(ts)
            }
            T_LOOK => {
                let look = Look::from_repr(r.int()?).ok_or("look")?;
                let next = r.link(i)?;
                b.add_look(next, look)
            }
            T_UNION => {
                let n = r.int()? as usize;
                let mut alts = Vec::with_capacity(n.min(256));
                for _ in 0..n {
                    alts.push(r.link(i)?);
                }
                b.add_union(alts)
            }
            T_CAPTURE => {
                let pid = r.int()? as usize;
                let group = r.int()?;
                let end = r.byte()? == 1;
                let next = r.link(i)?;
                patterns_open.enter(&mut b, pid)?;
                if end {
                    b.add_capture_end(next, group)
                } else {
                    b.add_capture_start(next, group, None)
                }
            }
            T_FAIL => b.add_fail(),
            T_MATCH => {
                let pid = r.int()? as usize;
                patterns_open.enter(&mut b, pid)?;
                b.add_match()
            }
            _ => return Err("state tag"),
        }
        .map_err(err("add state"))?;
        if id.as_usize() != i {
            return Err("state ids");
        }
    }
    patterns_open.close(&mut b)?;
    if patterns_open.next != patterns {
        return Err("pattern without a match state");
    }
    let nfa = b
        .build(start_anchored, start_unanchored)
        .map_err(err("build"))?;
    Ok((nfa, r.at))
}
