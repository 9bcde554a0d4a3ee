//! The world feed this service projects watches from: DiffDelta's ddv1
//! format read as it is served ([`ddv1`]) and the committed stack map
//! ([`stacks`]). Pure: fetching and storing the world is the Worker's; the
//! projection over it is [`crate::core::projection`].

pub mod ddv1;
pub mod stacks;
