//! A single-flight async lock for one Durable Object instance.
//!
//! A Durable Object's input gate only holds while it waits on its own storage;
//! as soon as a write awaits another object (the per-IP quota DO) or a KV put,
//! the runtime may start the next request on the same object. Every write
//! therefore runs inside this lock so "load state, check, commit" can never
//! interleave. Wasm is single-threaded, so a `RefCell` is enough; there are no
//! threads, only tasks that yield at `.await` points.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
pub struct Lock {
    inner: RefCell<Inner>,
}

#[derive(Default)]
struct Inner {
    locked: bool,
    waiters: Vec<Waker>,
}

impl Lock {
    /// Resolves to a guard once no other guard is alive.
    pub fn acquire(&self) -> Acquire<'_> {
        Acquire { lock: self }
    }
}

pub struct Acquire<'a> {
    lock: &'a Lock,
}

impl<'a> Future for Acquire<'a> {
    type Output = Guard<'a>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Guard<'a>> {
        let lock = self.lock;
        let mut inner = lock.inner.borrow_mut();
        if inner.locked {
            inner.waiters.push(cx.waker().clone());
            Poll::Pending
        } else {
            inner.locked = true;
            Poll::Ready(Guard { lock })
        }
    }
}

/// Releases the lock when dropped, including on early return or error.
pub struct Guard<'a> {
    lock: &'a Lock,
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        // Wake every waiter rather than just the first: a waiter whose request
        // was abandoned would otherwise swallow the wake-up and stall the rest.
        // The losers simply re-register; there are only ever a handful.
        let waiters = {
            let mut inner = self.lock.inner.borrow_mut();
            inner.locked = false;
            std::mem::take(&mut inner.waiters)
        };
        for w in waiters {
            w.wake();
        }
    }
}
