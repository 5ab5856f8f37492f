//! Caller memory lent to the rank threads for one call.
//!
//! The CPU backend's rank threads live as long as the engine, but a
//! host-slice call borrows the caller's slices for the call only. [`lend`]
//! turns the borrows into [`Loan`]s the rank threads can hold, runs the
//! call, and ends every loan before it returns (also when the call panics
//! or fails): from then on a loan gives no bytes, whatever thread still
//! holds it, so no access can outlive the borrow. Each access takes the
//! loan's lock and keeps it while the slice is in use, so ending a loan
//! waits for an access in progress (a copy or a reduction of one step) and
//! never for a wait of the plan.

use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard};

/// Where lent bytes are, while the loan lasts.
struct Raw {
    ptr: NonNull<u8>,
    len: usize,
    writable: bool,
}

// SAFETY: `Raw` stands for a `&[u8]` (read-only) or a `&mut [u8]`
// (writable) of the caller's, both of which are `Send`; every access goes
// through the loan's mutex, so moving or sharing the pointer between
// threads adds no unsynchronized access.
unsafe impl Send for Raw {}

/// One lent slice, shared by the threads that may access it.
#[derive(Clone)]
pub struct Loan(Arc<Mutex<Option<Raw>>>);

impl std::fmt::Debug for Loan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match &*g {
            Some(r) => write!(
                f,
                "Loan({} bytes, {})",
                r.len,
                if r.writable { "writable" } else { "read-only" }
            ),
            None => write!(f, "Loan(ended)"),
        }
    }
}

/// Access to a loan's bytes while held.
pub struct LoanGuard<'a>(MutexGuard<'a, Option<Raw>>);

impl Loan {
    /// Hold the loan (blocks only while another thread accesses it).
    pub fn lock(&self) -> LoanGuard<'_> {
        LoanGuard(self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Its length in bytes (0 once ended).
    pub fn len(&self) -> usize {
        self.lock().0.as_ref().map_or(0, |r| r.len)
    }

    fn end(&self) {
        *self.lock().0 = None;
    }
}

impl LoanGuard<'_> {
    /// The lent bytes; `None` once the loan ended.
    pub fn bytes(&self) -> Option<&[u8]> {
        let r = self.0.as_ref()?;
        // SAFETY: while the loan lasts, `ptr..ptr+len` is a slice the caller
        // of `lend` borrowed for at least as long (`lend` ends the loan, under
        // this lock, before it returns); the lock makes this the only access
        // through the loan now, and a read-only loan is never written.
        Some(unsafe { std::slice::from_raw_parts(r.ptr.as_ptr(), r.len) })
    }

    /// The lent bytes for writing; `None` once the loan ended or when it is
    /// read-only.
    pub(crate) fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        let r = self.0.as_mut().filter(|r| r.writable)?;
        // SAFETY: as in `bytes`, and the loan came from a `&mut [u8]`
        // (`writable`), which nothing else can reach while `lend` runs; the
        // lock (held by `&mut self`) makes this the only reference.
        Some(unsafe { std::slice::from_raw_parts_mut(r.ptr.as_ptr(), r.len) })
    }
}

/// Ends the loans when dropped: on return and on unwinding alike.
struct EndOnDrop<'a>(&'a [Loan]);

impl Drop for EndOnDrop<'_> {
    fn drop(&mut self) {
        for l in self.0 {
            l.end();
        }
    }
}

/// Lend `inputs` (read-only) and `outputs` (writable) for the duration of
/// `f`, which gets their loans in order; every loan has ended when `lend`
/// returns, or unwinds.
pub(crate) fn lend<R>(
    inputs: &[&[u8]],
    outputs: &mut [&mut [u8]],
    f: impl FnOnce(&[Loan], &[Loan]) -> R,
) -> R {
    let raw = |ptr: *mut u8, len: usize, writable: bool| {
        Loan(Arc::new(Mutex::new(Some(Raw {
            ptr: NonNull::new(ptr).unwrap_or(NonNull::dangling()),
            len,
            writable,
        }))))
    };
    let ins: Vec<Loan> = inputs
        .iter()
        .map(|s| raw(s.as_ptr().cast_mut(), s.len(), false))
        .collect();
    let outs: Vec<Loan> = outputs
        .iter_mut()
        .map(|s| raw(s.as_mut_ptr(), s.len(), true))
        .collect();
    let _end_ins = EndOnDrop(&ins);
    let _end_outs = EndOnDrop(&outs);
    f(&ins, &outs)
}

#[cfg(test)]
mod tests;
