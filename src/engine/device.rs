//! [`DeviceBuffers`]: per-rank buffers that stay on the devices, and the
//! [`Engine`] calls that allocate, fill, read and reduce them.

use super::buffers::{as_bytes, as_bytes_mut};
use super::{CallInfo, Engine};
use crate::backend::{Binding, BufId};
use crate::element::{Element, ReduceOp};
use crate::error::{Error, Result};
use crate::plan::{Collective, Shape};
use std::marker::PhantomData;
use std::sync::Arc;

/// One buffer of `len` elements of `T` on every rank's device, owned by
/// the engine that allocated it ([`Engine::alloc`]); data stays there (no
/// host staging) between calls. Every backend has them: on the CPU backend
/// they are host memory of the rank (shared memory in the multi-process
/// mode), so code written for device buffers runs with or without the
/// `cuda` feature.
#[derive(Debug)]
pub struct DeviceBuffers<T> {
    pub(super) id: BufId,
    pub(super) len: usize,
    pub(super) engine: u64,
    pub(super) _t: PhantomData<fn() -> T>,
}

impl<T> DeviceBuffers<T> {
    /// Elements per rank.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether they hold no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The engine's id of these buffers.
    pub fn id(&self) -> BufId {
        self.id
    }

    /// Another handle of the same buffers (for the per-rank style, where
    /// every rank holds one).
    pub(crate) fn duplicate(&self) -> DeviceBuffers<T> {
        DeviceBuffers {
            id: self.id,
            len: self.len,
            engine: self.engine,
            _t: PhantomData,
        }
    }
}

impl Engine {
    /// Buffers of `len` elements of `T` on every rank's device (host memory on the CPU backend).
    pub fn alloc<T: Element>(&mut self, len: usize) -> Result<DeviceBuffers<T>> {
        let bytes = len
            .checked_mul(T::DTYPE.size())
            .ok_or_else(|| Error::BadArgument(format!("{len} elements overflow")))?;
        let id = self.alloc_id(&vec![bytes; self.ranks()])?;
        Ok(DeviceBuffers {
            id,
            len,
            engine: self.id,
            _t: PhantomData,
        })
    }

    /// Free a buffer of this engine.
    pub fn free<T: Element>(&mut self, b: DeviceBuffers<T>) -> Result<()> {
        self.own(&b)?;
        self.free_id(b.id)
    }

    pub(super) fn own<T: Element>(&self, b: &DeviceBuffers<T>) -> Result<()> {
        if b.engine != self.id {
            return Err(Error::BadArgument(
                "the buffer belongs to another engine".into(),
            ));
        }
        Ok(())
    }

    /// Write `data` to the start of rank `rank`'s part of `b`.
    pub fn write_buffer<T: Element>(
        &mut self,
        b: &DeviceBuffers<T>,
        rank: usize,
        data: &[T],
    ) -> Result<()> {
        self.own(b)?;
        self.check_rank(rank)?;
        if data.len() > b.len {
            return Err(Error::BufferSize {
                rank,
                what: "device buffer",
                expected: b.len,
                found: data.len(),
            });
        }
        self.write(rank, b.id, 0, as_bytes(data))
    }

    /// Read rank `rank`'s part of `b`.
    pub fn read_buffer<T: Element>(&mut self, b: &DeviceBuffers<T>, rank: usize) -> Result<Vec<T>> {
        self.own(b)?;
        self.check_rank(rank)?;
        let mut out = crate::sys::proc::zeroed::<T>(
            b.len,
            &format!("rank {rank}'s copy of a device buffer"),
        )?;
        self.read(rank, b.id, 0, as_bytes_mut(&mut out))?;
        Ok(out)
    }

    /// A collective on device buffers: `send` and `recv` are the same buffer
    /// for an in-place call. `count` is NCCL's count. Waits for completion.
    pub fn collective_device<T: Element>(
        &mut self,
        collective: Collective,
        send: &DeviceBuffers<T>,
        recv: &DeviceBuffers<T>,
        count: usize,
        op: ReduceOp,
    ) -> Result<CallInfo> {
        let (shape, bind) = self.device_call(collective, send, recv, count)?;
        let plan = self.launch_bound(None, shape, T::DTYPE, op, bind)?;
        self.synchronize()?;
        Ok(CallInfo::of(&plan))
    }

    /// The shape and bindings of a collective on device buffers, checked
    /// (for [`Engine::collective_device`] and the stream-ordered calls).
    pub(in crate::engine) fn device_call<T: Element>(
        &self,
        collective: Collective,
        send: &DeviceBuffers<T>,
        recv: &DeviceBuffers<T>,
        count: usize,
    ) -> Result<(Shape, Arc<Vec<Binding>>)> {
        self.own(send)?;
        self.own(recv)?;
        let in_place = send.id == recv.id;
        let shape = self.shape::<T>(collective, count, in_place);
        let need_recv = shape.recv_len();
        if recv.len < need_recv || (!in_place && send.len < shape.send_len()) {
            return Err(Error::BufferSize {
                rank: 0,
                what: "device buffer",
                expected: need_recv.max(shape.send_len()),
                found: recv.len.min(send.len),
            });
        }
        let bind = Binding::every_rank(send.id, recv.id, self.ranks());
        Ok((shape.shape(), bind))
    }

    /// All-reduce of `count` elements on device buffers.
    pub fn all_reduce_device<T: Element>(
        &mut self,
        send: &DeviceBuffers<T>,
        recv: &DeviceBuffers<T>,
        count: usize,
        op: ReduceOp,
    ) -> Result<CallInfo> {
        self.collective_device(Collective::AllReduce, send, recv, count, op)
    }
}
