//! Strict JSON: the single parser every inbound body goes through.
//!
//! `serde_json` does the lexing (UTF-8 validation, escapes, lone-surrogate
//! rejection, number syntax); this module adds what the wire contract needs on
//! top: duplicate object keys are an error (not "last one wins", which would let
//! a signer and a verifier disagree about what was signed), nesting is bounded,
//! numbers are IEEE doubles (the I-JSON model RFC 8785 canonicalises), and
//! object key order is kept so nothing is silently reordered before hashing.

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use std::collections::HashSet;
use std::fmt;

/// Deepest nesting of arrays/objects accepted anywhere. A valid envelope needs 5
/// (envelope > capsule > constraints > item > value array); the bound keeps the
/// recursive checks cheap and stack use tiny.
pub const MAX_DEPTH: usize = 16;

/// A parsed JSON value. Objects keep their key order and never hold a key twice.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// Always finite: the parser never produces NaN or an infinity.
    Number(f64),
    /// A string, escapes decoded (never a lone surrogate).
    String(String),
    /// An array, items in document order.
    Array(Vec<Json>),
    /// An object's members in document order; no key occurs twice.
    Object(Vec<(String, Json)>),
}

/// Why a body is not acceptable JSON. All map to the `invalid_json` reason code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonError {
    /// An object holds this key twice (at any depth, also when spelled with escapes);
    /// the key as decoded.
    DuplicateKey(String),
    /// Arrays/objects nest deeper than [`MAX_DEPTH`] (16).
    TooDeep,
    /// Syntax, encoding, escape or number-range problem, as serde_json words it.
    Syntax(String),
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonError::DuplicateKey(k) => write!(f, "duplicate object key {k:?}"),
            JsonError::TooDeep => write!(f, "nesting deeper than {MAX_DEPTH} levels"),
            JsonError::Syntax(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for JsonError {}

// Markers smuggled through serde's string errors so `parse` can tell our own
// failures apart from serde_json's syntax errors.
const DUP_MARK: &str = "\u{0}dup:";
const DEEP_MARK: &str = "\u{0}deep";

/// Parses one JSON document from raw bytes (which must be UTF-8).
pub fn parse(bytes: &[u8]) -> Result<Json, JsonError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Seed { depth: 0 }.deserialize(&mut de).map_err(map_err)?;
    de.end().map_err(map_err)?;
    Ok(value)
}

/// Parses a JSON document held in a string.
pub fn parse_str(text: &str) -> Result<Json, JsonError> {
    parse(text.as_bytes())
}

fn map_err(e: serde_json::Error) -> JsonError {
    let msg = e.to_string();
    if let Some(rest) = msg.strip_prefix(DUP_MARK) {
        // serde_json appends " at line L column C"; keep only the key.
        let key = rest.rsplit_once(" at line ").map_or(rest, |(k, _)| k);
        JsonError::DuplicateKey(key.to_string())
    } else if msg.starts_with(DEEP_MARK) || msg.starts_with("recursion limit exceeded") {
        JsonError::TooDeep
    } else {
        JsonError::Syntax(msg)
    }
}

struct Seed {
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Seed {
    type Value = Json;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Number(v as f64))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Number(v as f64))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
        if v.is_finite() {
            Ok(Json::Number(v))
        } else {
            Err(E::custom("number out of range"))
        }
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let depth = self.depth + 1;
        if depth > MAX_DEPTH {
            return Err(de::Error::custom(DEEP_MARK));
        }
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Seed { depth })? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let depth = self.depth + 1;
        if depth > MAX_DEPTH {
            return Err(de::Error::custom(DEEP_MARK));
        }
        let mut entries: Vec<(String, Json)> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(format!("{DUP_MARK}{key}")));
            }
            let value = map.next_value_seed(Seed { depth })?;
            entries.push((key, value));
        }
        Ok(Json::Object(entries))
    }
}

/// Largest integer a double holds exactly (2^53 - 1): the ceiling for `seq`.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

impl Json {
    /// The members of an object, in document order; `None` for any other value.
    pub fn as_object(&self) -> Option<&[(String, Json)]> {
        match self {
            Json::Object(entries) => Some(entries),
            _ => None,
        }
    }
    /// The items of an array; `None` for any other value.
    pub fn as_array(&self) -> Option<&[Json]> {
        match self {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }
    /// The text of a string; `None` for any other value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }
    /// The value of a boolean; `None` for any other value.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }
    /// The value of a number (always finite); `None` for any other value.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Number(n) => Some(*n),
            _ => None,
        }
    }
    /// The value as a non-negative integer no larger than 2^53 - 1, if it is one.
    /// `3.0` counts (JSON does not distinguish it from `3`); `3.5` does not.
    pub fn as_safe_u64(&self) -> Option<u64> {
        match self {
            Json::Number(n) if *n >= 0.0 && n.fract() == 0.0 && *n <= MAX_SAFE_INTEGER as f64 => {
                Some(*n as u64)
            }
            _ => None,
        }
    }
    /// Member `key` of an object (None for non-objects and missing keys).
    pub fn get(&self, key: &str) -> Option<&Json> {
        self.as_object()?
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }
    /// A short name of the value's JSON type, for error details.
    pub fn type_name(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "boolean",
            Json::Number(_) => "number",
            Json::String(_) => "string",
            Json::Array(_) => "array",
            Json::Object(_) => "object",
        }
    }
}

impl From<&str> for Json {
    fn from(s: &str) -> Self {
        Json::String(s.to_owned())
    }
}
impl From<String> for Json {
    fn from(s: String) -> Self {
        Json::String(s)
    }
}
impl From<bool> for Json {
    fn from(b: bool) -> Self {
        Json::Bool(b)
    }
}
impl From<u64> for Json {
    fn from(n: u64) -> Self {
        Json::Number(n as f64)
    }
}

/// Serialising keeps key order; integral numbers are written without a
/// fraction so `3` round-trips as `3`, not `3.0`. (Hashing never uses this:
/// it uses `jcs::canonicalize`.)
impl serde::Serialize for Json {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => s.serialize_unit(),
            Json::Bool(b) => s.serialize_bool(*b),
            Json::Number(n) => {
                if n.fract() == 0.0 && n.abs() <= MAX_SAFE_INTEGER as f64 {
                    s.serialize_i64(*n as i64)
                } else {
                    s.serialize_f64(*n)
                }
            }
            Json::String(v) => s.serialize_str(v),
            Json::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Json::Object(entries) => {
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

/// Deserialising (from already-trusted data such as our own storage) goes
/// through the same strict visitor.
impl<'de> serde::Deserialize<'de> for Json {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Seed { depth: 0 }.deserialize(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_key_order() {
        let v = parse_str(r#"{"b":1,"a":2}"#).unwrap();
        let keys: Vec<_> = v
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(keys, ["b", "a"]);
    }

    #[test]
    fn rejects_duplicate_keys_at_any_depth() {
        assert_eq!(
            parse_str(r#"{"a":1,"a":2}"#),
            Err(JsonError::DuplicateKey("a".into()))
        );
        assert_eq!(
            parse_str(r#"{"x":[{"k":1,"k":1}]}"#),
            Err(JsonError::DuplicateKey("k".into()))
        );
        // Same key in sibling objects is fine.
        assert!(parse_str(r#"[{"k":1},{"k":1}]"#).is_ok());
    }

    #[test]
    fn escaped_duplicate_key_is_still_a_duplicate() {
        assert!(matches!(
            parse_str(r#"{"a":1,"\u0061":2}"#),
            Err(JsonError::DuplicateKey(_))
        ));
    }

    #[test]
    fn bounds_depth() {
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(parse_str(&ok).is_ok());
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert_eq!(parse_str(&deep), Err(JsonError::TooDeep));
        let very_deep = "[".repeat(100_000);
        assert_eq!(parse_str(&very_deep), Err(JsonError::TooDeep));
    }

    #[test]
    fn rejects_lone_surrogates_invalid_utf8_and_non_numbers() {
        for bad in [
            r#""\ud800""#,
            r#""\udc00""#,
            r#""\ud800\u0041""#,
            "NaN",
            "Infinity",
            "-Infinity",
            "1e400",
            "[1,]",
            "{\"a\":1,}",
            "01",
            "",
            "{} {}",
        ] {
            assert!(
                matches!(parse_str(bad), Err(JsonError::Syntax(_))),
                "{bad:?} should fail"
            );
        }
        assert!(matches!(parse(b"\"\xff\""), Err(JsonError::Syntax(_))));
        assert!(matches!(
            parse(b"\xef\xbb\xbf{}"),
            Err(JsonError::Syntax(_))
        ));
        // A correctly paired surrogate is fine.
        assert_eq!(parse_str(r#""\ud83d\ude00""#).unwrap(), Json::from("😀"));
    }

    #[test]
    fn safe_integers() {
        assert_eq!(
            parse_str("9007199254740991").unwrap().as_safe_u64(),
            Some(MAX_SAFE_INTEGER)
        );
        assert_eq!(parse_str("9007199254740992").unwrap().as_safe_u64(), None);
        assert_eq!(parse_str("3.0").unwrap().as_safe_u64(), Some(3));
        assert_eq!(parse_str("3.5").unwrap().as_safe_u64(), None);
        assert_eq!(parse_str("-1").unwrap().as_safe_u64(), None);
        assert_eq!(parse_str("\"1\"").unwrap().as_safe_u64(), None);
    }

    #[test]
    fn serialises_in_order_with_integral_numbers() {
        let v = parse_str(r#"{"z":3.0,"a":[1.5,null,true]}"#).unwrap();
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"z":3,"a":[1.5,null,true]}"#
        );
    }
}

/// JSON paths for findings and violations, in the `$.a.b[0]` style; keys that
/// are not plain identifiers are written `$["odd key"]`.
pub mod path {
    /// The path of member `key` under `parent`.
    pub fn key(parent: &str, key: &str) -> String {
        let plain = !key.is_empty()
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !key.starts_with(|c: char| c.is_ascii_digit());
        if plain {
            format!("{parent}.{key}")
        } else {
            format!(
                "{parent}[{}]",
                serde_json::to_string(key).unwrap_or_default()
            )
        }
    }
    /// The path of element `i` under `parent`.
    pub fn index(parent: &str, i: usize) -> String {
        format!("{parent}[{i}]")
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn formats() {
            assert_eq!(super::key("$", "policy"), "$.policy");
            assert_eq!(super::index("$.objectives", 2), "$.objectives[2]");
            assert_eq!(super::key("$", "a b\""), r#"$["a b\""]"#);
            assert_eq!(super::key("$", "9x"), r#"$["9x"]"#);
        }
    }
}
