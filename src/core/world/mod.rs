//! The world feed this service projects watches from: DiffDelta's ddv1
//! format read as it is served ([`ddv1`]), the committed stack map
//! ([`stacks`]), and the refresh of the stored snapshot ([`refresh`]). Pure: fetching and storing the world is the Worker's; the
//! projection over it is [`crate::core::projection`].

pub mod ddv1;
pub mod refresh;
pub mod stacks;
