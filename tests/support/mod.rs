//! Helpers shared by the integration tests (each test crate uses a subset).
#![allow(dead_code)]

pub mod capsules;
pub mod generated;
pub mod schemas;
