//! The Durable Objects. Each is built on `do_wire` (the calls it answers),
//! `storage` (its own state) and `http` (the answers it returns); neither
//! calls back into the Worker's handlers.

pub mod agent;
pub mod feed;
pub mod ip_quota;
pub mod nonces;
pub mod payment;
mod sockets;
pub mod stats;
pub mod tags;
