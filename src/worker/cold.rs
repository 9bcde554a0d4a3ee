//! Cold paths. An `async fn`'s body is compiled into its caller's: awaiting
//! one inlines its whole state machine, so the entry Worker's read path was
//! one wasm function of ~105 KB holding every read (history, the key log, a
//! signed read's verification). V8 compiles a wasm function on its first
//! call, whole, so a fresh isolate's first head.json paid for all of it
//! (measured: 105 KB -> 23 KB, about 13 ms off that first answer here).
//! What rarely runs is awaited through [`path`] instead, and compiled only
//! when it first runs.

use std::future::Future;
use std::pin::Pin;

/// `f` as a future of its own: awaited through a pointer, its code stays out
/// of the caller's function.
pub fn path<'a, T>(f: impl Future<Output = T> + 'a) -> Pin<Box<dyn Future<Output = T> + 'a>> {
    Box::pin(f)
}
