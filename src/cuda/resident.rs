//! The resident exchange kernel (`rr_resident_<op>_<type>` in
//! `ptx/reduce_<type>.ptx`): one launch that serves calls from a ring of
//! 64-byte descriptors in host-mapped memory until a quit descriptor. A call
//! costs the host one descriptor write instead of a `cuLaunchKernel`.
//!
//! Protocol (the PTX header says the same from the kernel's side):
//! * descriptor `k` sits in slot `k % RESIDENT_RING`: `seq` (written last,
//!   after a release fence), then dst, a, peer_slot, my_slot, n, flags,
//!   scalar; `n = u64::MAX` quits;
//! * each block stores `k` into its word of `host_done` (release, system
//!   scope) when it has finished descriptor `k` (a call or the quit); a slot
//!   is written again only once every block's word has reached the
//!   descriptor that used it (blocks drift apart: each waits only for its
//!   partner block on the peer);
//! * sequence numbers are never reused (they start at 1 and grow across
//!   kernels), so a stale descriptor of an earlier kernel never matches.
//!
//! Lifetime rule, kept here rather than by the caller: every allocation a
//! posted call names is held (an `Arc`) until `host_done` passes the call,
//! and what the running kernel itself uses (flags, call counts, the peer's
//! flags, the control block) until its stream is idle. Nothing is freed
//! while the kernel runs: freeing device memory waits for the device, and
//! the kernel waits for this thread's next descriptor, so a free there
//! hangs until the kernel's deadline. A finished call whose buffer the
//! owner has already let go is kept in a graveyard instead, emptied by
//! [`Resident::reap`] once the kernel has returned. Dropping the handle
//! stops the kernel and waits, bounded, for it; if it does not stop, the
//! memory it may touch is leaked, never freed under it.

use super::driver::Ctx;
use super::kernels::{exchange_blocks, ExchangeOperands, Kernel, EXCHANGE_MAX_BLOCKS};
use super::memory::{Alloc, DevBuf, HostMapped, PeerBuf};
use super::stream::{Event, Stream};
use super::{err, CuResult};
use std::collections::VecDeque;
use std::mem::ManuallyDrop;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Descriptors in the ring (a power of two).
pub const RESIDENT_RING: usize = 64;
/// Words per descriptor.
const DESC_WORDS: usize = 8;
/// The kernel's words, one per block: after the ring.
const HOST_DONE: usize = RESIDENT_RING * DESC_WORDS;
/// `n` of the quit descriptor.
const QUIT: u64 = u64::MAX;

const CALL: &str = "resident exchange";

/// A kernel that was started: what it serves and what it uses while it runs.
struct Running {
    tag: u64,
    blocks: usize,
    _keep: Vec<Arc<Alloc>>,
    ctrl: Arc<HostMapped>,
}

/// A rank's resident exchange: its own stream, the descriptor ring, and the
/// kernel when one is running.
pub struct Resident<'id> {
    stream: Stream<'id>,
    ring: ManuallyDrop<HostMapped>,
    /// Blocks of the last kernel started (its words of host_done count).
    blocks: usize,
    /// Every descriptor up to this one is finished: the last one written
    /// before a kernel was seen to return.
    floor: u64,
    /// Recorded after each launch: complete once that kernel returned.
    exit: Event<'id>,
    running: Option<Running>,
    /// Kernels told to quit whose stream may still run them.
    retired: Vec<Running>,
    /// The next descriptor's sequence number.
    next: u64,
    /// Posted calls and the allocations they name, until `host_done`
    /// passes them.
    inflight: VecDeque<(u64, [Arc<Alloc>; 4])>,
    /// Allocations only this handle still held when their call finished:
    /// freed by [`Resident::reap`], never while a kernel runs.
    graveyard: Vec<Arc<Alloc>>,
    /// Bound on every wait (a free slot, the kernel's exit at drop).
    limit: Duration,
}

impl<'id> Ctx<'id> {
    /// A resident exchange for this device (nothing launched yet); `limit`
    /// bounds every wait it makes.
    pub fn resident(&self, limit: Duration) -> CuResult<Resident<'id>> {
        Ok(Resident {
            stream: self.stream()?,
            ring: ManuallyDrop::new(self.host_mapped((HOST_DONE + EXCHANGE_MAX_BLOCKS) * 8)?),
            blocks: 0,
            floor: 0,
            exit: self.event()?,
            running: None,
            retired: Vec::new(),
            next: 1,
            inflight: VecDeque::new(),
            graveyard: Vec::new(),
            limit,
        })
    }
}

impl<'id> Resident<'id> {
    /// The running kernel's (tag, blocks), if one runs.
    pub fn running(&self) -> Option<(u64, usize)> {
        self.running.as_ref().map(|r| (r.tag, r.blocks))
    }

    /// Complete once the last kernel started has returned (after a
    /// [`Resident::stop`], the point other streams wait for).
    pub fn exit_event(&self) -> &Event<'id> {
        &self.exit
    }

    /// The kernel's stream.
    pub fn stream(&self) -> &Stream<'id> {
        &self.stream
    }

    /// The last descriptor every block finished (acquire): the least of the
    /// last kernel's words, or the floor (words of earlier kernels are at
    /// most the floor).
    fn host_done(&self) -> u64 {
        let least = (0..self.blocks)
            .map(|b| self.ring.load_u64(HOST_DONE + b))
            .min()
            .unwrap_or(0);
        fence(Ordering::Acquire);
        least.max(self.floor)
    }

    /// Launch `k`, an `rr_resident_*` kernel, with `blocks` blocks on this
    /// handle's stream after `after`; `tag` names what it serves. The
    /// flag arrays, call counts and control block are the rank's exchange
    /// ones (`ctrl`: word 0 abort and status, word 1 the deadline).
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        &mut self,
        k: &Kernel<'id>,
        tag: u64,
        blocks: usize,
        after: &[&Event<'id>],
        my_flags: &DevBuf<'id>,
        calls: &DevBuf<'id>,
        peer_flags: &PeerBuf,
        ctrl: &Arc<HostMapped>,
    ) -> CuResult<()> {
        const LAUNCH: &str = "cuLaunchKernel(resident)";
        if self.running.is_some() {
            return Err(err(LAUNCH, "a resident kernel is already running"));
        }
        if blocks == 0 || blocks > EXCHANGE_MAX_BLOCKS {
            return Err(err(LAUNCH, format!("{blocks} blocks")));
        }
        let mf = my_flags.ptr_at(LAUNCH, 0, 8 * blocks)?;
        let cl = calls.ptr_at(LAUNCH, 0, 8 * blocks)?;
        let (pf_keep, pf) = peer_flags.range(LAUNCH, 0, 8 * blocks)?;
        ctrl.device_ptr(1)?;
        let c = ctrl.device_ptr(0)?;
        self.ring.device_ptr(HOST_DONE + blocks - 1)?;
        for ev in after {
            self.stream.wait_local(ev)?;
        }
        let args = [
            self.ring.device_ptr(0)?,
            (RESIDENT_RING - 1) as u64,
            self.next,
            self.ring.device_ptr(HOST_DONE)?,
            pf,
            mf,
            cl,
            c,
        ];
        // SAFETY: the resident kernels take eight u64 parameters in this
        // order. The ring and host_done are this handle's host-mapped block
        // (RESIDENT_RING descriptors, then one word per block, checked);
        // both flag arrays and the call counts hold one u64 per block
        // (checked); ctrl is a live 16-byte host-mapped block (words 0 and 1
        // checked). All of them stay alive until the kernel returns: the
        // ring is this handle's (its Drop waits for the kernel or leaks it),
        // the others are held in `Running` until the stream is idle. Every
        // address a descriptor names is checked and held by `post`.
        unsafe { self.stream.launch_1d(k, blocks, &args, LAUNCH)? };
        self.blocks = blocks;
        self.stream.record(&self.exit)?;
        self.running = Some(Running {
            tag,
            blocks,
            _keep: vec![pf_keep, my_flags.alloc.clone(), calls.alloc.clone()],
            ctrl: ctrl.clone(),
        });
        Ok(())
    }

    /// Wait (bounded) until the slot of descriptor `seq` is free.
    fn wait_slot(&self, seq: u64, ctrl: &HostMapped) -> CuResult<()> {
        let need = seq.saturating_sub(RESIDENT_RING as u64);
        if need == 0 || self.host_done() >= need {
            return Ok(());
        }
        let t = Instant::now();
        let mut i = 0u32;
        loop {
            if self.host_done() >= need {
                return Ok(());
            }
            // Abort (word 0's low half) or a block's status (high half).
            if ctrl.load_u64(0) != 0 {
                return Err(err(
                    CALL,
                    "the resident kernel stopped (aborted, or a hand-shake gave up)",
                ));
            }
            if t.elapsed() > self.limit {
                return Err(err(
                    CALL,
                    format!(
                        "no free descriptor after {:.1} s: the kernel has not finished call {need}",
                        self.limit.as_secs_f64()
                    ),
                ));
            }
            i = i.wrapping_add(1);
            if i < 4000 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Write descriptor `seq` (operands first, then `seq` after a release
    /// fence: the kernel's acquire of `seq` sees them).
    fn write(&mut self, words: [u64; DESC_WORDS - 1]) -> u64 {
        let seq = self.next;
        let base = (seq as usize & (RESIDENT_RING - 1)) * DESC_WORDS;
        for (j, w) in words.into_iter().enumerate() {
            self.ring.store_u64(base + 1 + j, w);
        }
        fence(Ordering::Release);
        self.ring.store_u64(base, seq);
        self.next += 1;
        seq
    }

    /// Let go of what finished calls held; an allocation nobody else holds
    /// goes to the graveyard (dropping it would free it under the kernel).
    fn prune(&mut self) {
        let done = self.host_done();
        while self.inflight.front().is_some_and(|(s, _)| *s <= done) {
            if let Some((_, allocs)) = self.inflight.pop_front() {
                for a in allocs {
                    if Arc::strong_count(&a) == 1 {
                        self.graveyard.push(a);
                    }
                }
            }
        }
    }

    /// Free what finished calls and stopped kernels held. Call only when no
    /// kernel of this handle runs (after [`Resident::stop`] and its stream
    /// is idle); refused otherwise.
    pub fn reap(&mut self) -> CuResult<()> {
        if self.running.is_some() || !self.stream.is_idle()? {
            return Err(err(CALL, "reap while the resident kernel runs"));
        }
        // No kernel runs: nothing will read a descriptor written so far.
        self.floor = self.next - 1;
        self.prune();
        self.graveyard.clear();
        self.retired.clear();
        Ok(())
    }

    /// Post one call to the running kernel (checked as
    /// [`Stream::exchange`] checks a launch, plus: the call's grid is the
    /// running kernel's). Returns once the descriptor is written; the call
    /// completes on the kernel's stream.
    pub fn post(&mut self, c: &ExchangeOperands<'_, 'id>) -> CuResult<()> {
        let Some(run) = &self.running else {
            return Err(err(CALL, "no resident kernel is running"));
        };
        let o = c.check(CALL)?;
        let n = c.bytes;
        if exchange_blocks(n) != run.blocks {
            return Err(err(
                CALL,
                format!(
                    "a call of {n} bytes needs {} blocks; the kernel runs {}",
                    exchange_blocks(n),
                    run.blocks
                ),
            ));
        }
        let ctrl = run.ctrl.clone();
        self.wait_slot(self.next, &ctrl)?;
        self.prune();
        let seq = self.write([o.dst, o.a, o.peer_slot, o.my_slot, o.n, c.flags, c.scalar]);
        self.inflight.push_back((
            seq,
            [
                c.dst.0.alloc.clone(),
                c.a.0.alloc.clone(),
                o.peer_alloc,
                c.my_slot.0.alloc.clone(),
            ],
        ));
        Ok(())
    }

    /// Tell the running kernel to return after the calls posted so far (a
    /// quit descriptor); does not wait for it. Other streams that must
    /// follow those calls wait on [`Resident::exit_event`].
    pub fn stop(&mut self) -> CuResult<()> {
        let Some(run) = self.running.take() else {
            return Ok(());
        };
        let r = self.wait_slot(self.next, &run.ctrl);
        self.retired.push(run);
        r?;
        self.write([0, 0, 0, 0, QUIT, 0, 0]);
        Ok(())
    }
}

impl Drop for Resident<'_> {
    fn drop(&mut self) {
        // Stop the kernel, wait for it (bounded), and free the ring only if
        // it returned; else leak what it may still touch.
        let _ = self.stop();
        if self.stream.wait_idle(self.limit).is_ok() {
            // SAFETY: dropped exactly once, here, and the stream that used
            // it is idle.
            unsafe { ManuallyDrop::drop(&mut self.ring) }
        } else {
            std::mem::forget(std::mem::take(&mut self.retired));
            std::mem::forget(std::mem::take(&mut self.inflight));
            std::mem::forget(std::mem::take(&mut self.graveyard));
        }
    }
}
