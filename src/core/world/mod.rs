//! The world feed this service projects watches from: DiffDelta's ddv1
//! format read as it is served ([`ddv1`]), the committed stack map
//! ([`stacks`]), and the refresh of the stored snapshot ([`refresh`]). Pure: fetching and storing the world is the Worker's; the
//! projection over it is [`crate::core::projection`].

pub mod ddv1;
pub mod refresh;
pub mod stacks;

/// A map built by insertion. `collect()` into a `BTreeMap` sorts its input
/// first, and every key and value type sorted that way adds a sort's code to
/// the Worker's wasm (tens of kilobytes over this module's few maps); an
/// insertion loop reuses the map's own code.
pub(crate) fn map_of<K: Ord, V>(
    pairs: impl IntoIterator<Item = (K, V)>,
) -> std::collections::BTreeMap<K, V> {
    let mut m = std::collections::BTreeMap::new();
    for (k, v) in pairs {
        m.insert(k, v);
    }
    m
}
