//! The engine's buffers: reserve, allocate, free, write and read them, and
//! the memory check before any allocation.

use super::*;
use crate::backend::{HostRead, HostWrite};
use std::marker::PhantomData;

impl Engine {
    /// Make engine buffer `id` hold at least `bytes[r]` bytes on rank r,
    /// after checking that the devices have that memory free.
    pub fn reserve(&mut self, id: BufId, bytes: &[usize]) -> Result<()> {
        let fits = self.caps.get(&id).is_some_and(|have| {
            bytes
                .iter()
                .enumerate()
                .all(|(r, &b)| b <= have.get(r).copied().unwrap_or(0))
        });
        if fits {
            return Ok(());
        }
        // A reserve is collective in a multi-process job: an aborted or
        // poisoned engine must not wait in it for its peers.
        self.usable()?;
        let have = self.caps.get(&id).cloned().unwrap_or_default();
        let grow: Vec<usize> = bytes
            .iter()
            .enumerate()
            .map(|(r, &b)| {
                if b > have.get(r).copied().unwrap_or(0) {
                    b
                } else {
                    0
                }
            })
            .collect();
        self.check_memory(&grow, &format!("buffer {}", id.0))?;
        let want: Vec<usize> = bytes
            .iter()
            .enumerate()
            .map(|(r, &b)| b.max(have.get(r).copied().unwrap_or(0)))
            .collect();
        self.last = None;
        // Captured graphs hold the old buffers' addresses.
        self.generation += 1;
        let r = self.backend.reserve(id, &want);
        self.track(r)?;
        self.caps.insert(id, want);
        Ok(())
    }

    /// Error unless every device has `bytes[r]` more bytes free for rank r
    /// (ranks sharing a device add up).
    pub(crate) fn check_memory(&self, bytes: &[usize], what: &str) -> Result<()> {
        let mem = self.backend.memory()?;
        let mut need: HashMap<usize, (u64, u64)> = HashMap::new();
        for (r, &b) in bytes.iter().enumerate() {
            if let Some(Some(m)) = mem.get(r) {
                let e = need.entry(m.device).or_insert((0, m.free));
                e.0 += b as u64;
            }
        }
        let kind = self.backend_kind();
        for (device, (want, free)) in need {
            if want > 0 && free > 0 && want > free {
                return Err(Error::OutOfMemory {
                    what: what.to_string(),
                    memory: match kind {
                        BackendKind::Cuda => format!("GPU {device} memory"),
                        BackendKind::Cpu => "host memory".into(),
                    },
                    need: want,
                    available: free,
                    is_free: true,
                    hint: "use a smaller size or fewer ranks per device".into(),
                });
            }
        }
        Ok(())
    }

    /// A new engine buffer of `bytes[r]` bytes on rank r.
    pub fn alloc_id(&mut self, bytes: &[usize]) -> Result<BufId> {
        let id = BufId(self.next_id);
        self.next_id += 1;
        self.reserve(id, bytes)?;
        Ok(id)
    }

    /// Free an engine buffer allocated with [`Engine::alloc_id`].
    pub fn free_id(&mut self, id: BufId) -> Result<()> {
        if id.0 < 3 {
            return Err(Error::BadArgument(format!(
                "buffer {} is the engine's own",
                id.0
            )));
        }
        self.last = None;
        self.generation += 1;
        self.caps.remove(&id);
        let r = self.backend.release(id);
        self.track(r)
    }

    /// [`Error::RankOutOfRange`] unless `r` is one of the engine's ranks.
    pub(crate) fn check_rank(&self, r: usize) -> Result<()> {
        if r >= self.ranks {
            return Err(Error::RankOutOfRange {
                rank: r,
                ranks: self.ranks,
            });
        }
        Ok(())
    }

    /// Copy `data` into rank `r`'s buffer `id` at byte `offset`.
    pub fn write(&mut self, r: usize, id: BufId, offset: usize, data: &[u8]) -> Result<()> {
        self.write_all(&[HostWrite {
            rank: r,
            id,
            offset,
            data,
        }])
    }

    /// Copy rank `r`'s buffer `id` from byte `offset` into `out`.
    pub fn read(&mut self, r: usize, id: BufId, offset: usize, out: &mut [u8]) -> Result<()> {
        self.read_all(&mut [HostRead {
            rank: r,
            id,
            offset,
            out,
        }])
    }

    /// Make `writes` (one call's, of any local ranks) together: a backend
    /// with a thread per rank makes them in one round.
    pub(super) fn write_all(&mut self, writes: &[HostWrite<'_>]) -> Result<()> {
        for w in writes {
            self.check_rank(w.rank)?;
        }
        self.usable()?;
        self.last = None;
        let res = self.backend.write(writes);
        self.track(res)
    }

    /// Make `reads` together, as [`Engine::write_all`].
    pub(super) fn read_all(&mut self, reads: &mut [HostRead<'_>]) -> Result<()> {
        for r in reads.iter() {
            self.check_rank(r.rank)?;
        }
        let res = self.backend.read(reads);
        self.track(res)
    }
}

pub(super) fn as_bytes<T: Element>(v: &[T]) -> &[u8] {
    bytemuck::cast_slice(v)
}

pub(super) fn as_bytes_mut<T: Element>(v: &mut [T]) -> &mut [u8] {
    bytemuck::cast_slice_mut(v)
}

/// Check one buffer per rank, all of length `len(r)`.
fn check_lengths(
    ranks: usize,
    lens: &[usize],
    what: &'static str,
    expected: impl Fn(usize) -> usize,
) -> Result<()> {
    if lens.len() != ranks {
        return Err(Error::WrongBufferCount {
            ranks,
            buffers: lens.len(),
        });
    }
    for (rank, &l) in lens.iter().enumerate() {
        if l != expected(rank) {
            return Err(Error::BufferSize {
                rank,
                what,
                expected: expected(rank),
                found: l,
            });
        }
    }
    Ok(())
}

/// The shape of a call on elements of `T`: what [`Engine::load`] and
/// [`Engine::shape`] return, and what the calls on the engine's own buffers
/// take, so a call runs and reads back as the type it was loaded as. It
/// derefs to its [`Shape`].
pub struct TypedShape<T> {
    shape: Shape,
    _t: PhantomData<fn() -> T>,
}

impl<T: Element> TypedShape<T> {
    /// `shape` as a shape of `T`, if its element size is `T`'s.
    pub fn new(shape: Shape) -> Result<TypedShape<T>> {
        if shape.elem_size != T::DTYPE.size() {
            return Err(Error::BadArgument(format!(
                "a shape of {}-byte elements is not a shape of {} ({} bytes)",
                shape.elem_size,
                T::DTYPE.name(),
                T::DTYPE.size()
            )));
        }
        Ok(TypedShape {
            shape,
            _t: PhantomData,
        })
    }

    /// `shape`, whose element size the caller made `T`'s.
    pub(super) fn of(shape: Shape) -> TypedShape<T> {
        debug_assert_eq!(shape.elem_size, T::DTYPE.size());
        TypedShape {
            shape,
            _t: PhantomData,
        }
    }

    /// The untyped shape.
    pub fn shape(&self) -> Shape {
        self.shape
    }
}

impl<T> Clone for TypedShape<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for TypedShape<T> {}

impl<T: Element> std::fmt::Debug for TypedShape<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TypedShape<{}>({:?})", T::DTYPE.name(), self.shape)
    }
}

impl<T> PartialEq for TypedShape<T> {
    fn eq(&self, other: &Self) -> bool {
        self.shape == other.shape
    }
}

impl<T> std::ops::Deref for TypedShape<T> {
    type Target = Shape;
    fn deref(&self) -> &Shape {
        &self.shape
    }
}

impl Engine {
    // -- the engine's default buffers ---------------------------------------

    /// Write each rank's input of a `collective` call into the engine's
    /// default buffers (for NCCL's in-place all-gather: into the rank's own
    /// slice of the output); returns the call's shape. Inputs are `count`
    /// elements each (reduce-scatter: `ranks * count`). `inputs` holds every
    /// rank's; only the [local ranks](Engine::local_ranks) are written (in a
    /// multi-process job, each process writes its own).
    pub fn load<T: Element>(
        &mut self,
        collective: Collective,
        inputs: &[impl AsRef<[T]>],
        in_place: bool,
    ) -> Result<TypedShape<T>> {
        let shape = self.shape_of(collective, inputs, in_place)?;
        self.load_shaped(&shape, inputs)?;
        Ok(shape)
    }

    /// Write the local ranks' `inputs` for a call of `shape` (an empty
    /// input writes nothing: a broadcast's non-root ranks).
    pub(super) fn load_shaped<T: Element>(
        &mut self,
        shape: &Shape,
        inputs: &[impl AsRef<[T]>],
    ) -> Result<()> {
        self.reserve_shape(shape)?;
        let size = T::DTYPE.size();
        let local = self.local_ranks();
        let writes: Vec<HostWrite<'_>> = inputs
            .iter()
            .enumerate()
            .filter(|(r, _)| local.contains(r))
            .map(|(r, data)| {
                let input = shape.input(r);
                HostWrite {
                    rank: r,
                    id: Binding::DEFAULT.id(input.buf),
                    offset: input.range.start * size,
                    data: as_bytes(data.as_ref()),
                }
            })
            .collect();
        self.write_all(&writes)
    }

    /// The shape of a call on `inputs` (one per rank, of equal lengths; a
    /// reduce-scatter's split into the rank count).
    fn shape_of<T: Element>(
        &self,
        collective: Collective,
        inputs: &[impl AsRef<[T]>],
        in_place: bool,
    ) -> Result<TypedShape<T>> {
        let n = self.ranks();
        let lens: Vec<usize> = inputs.iter().map(|v| v.as_ref().len()).collect();
        let first = lens.first().copied().unwrap_or(0);
        check_lengths(n, &lens, "input", |_| first)?;
        let count = match collective {
            Collective::ReduceScatter => {
                if first % n != 0 {
                    return Err(Error::BadArgument(format!(
                        "reduce-scatter inputs of {first} elements do not split into {n} equal chunks"
                    )));
                }
                first / n
            }
            _ => first,
        };
        Ok(self.shape::<T>(collective, count, in_place))
    }

    fn reserve_shape(&mut self, shape: &Shape) -> Result<()> {
        let (n, size) = (self.ranks(), shape.elem_size);
        self.reserve(BufId::SEND, &vec![shape.send_len() * size; n])?;
        self.reserve(BufId::RECV, &vec![shape.recv_len() * size; n])
    }

    /// Overwrite what `shape`'s call will write but not read (its outputs
    /// out of place) with a pattern no result should have (all bits set:
    /// NaN for every float type), so unwritten elements show.
    pub fn poison<T: Element>(&mut self, shape: &TypedShape<T>) -> Result<()> {
        let size = T::DTYPE.size();
        let mut parts: Vec<(usize, usize, Vec<u8>)> = Vec::new();
        for r in self.local_ranks() {
            let out = shape.output(r);
            let input = shape.input(r);
            let ranges: Vec<std::ops::Range<usize>> = if !shape.in_place {
                vec![out.range.clone()]
            } else if shape.collective == Collective::AllGather {
                vec![
                    out.range.start..input.range.start,
                    input.range.end..out.range.end,
                ]
            } else {
                vec![]
            };
            for range in ranges.into_iter().filter(|r| !r.is_empty()) {
                parts.push((
                    r,
                    range.start * size,
                    vec![poison_byte::<T>(); range.len() * size],
                ));
            }
        }
        let writes: Vec<HostWrite<'_>> = parts
            .iter()
            .map(|(r, offset, pattern)| HostWrite {
                rank: *r,
                id: BufId::RECV,
                offset: *offset,
                data: pattern,
            })
            .collect();
        self.write_all(&writes)
    }

    /// The output of `shape`'s call of every [local rank](Engine::local_ranks)
    /// (in one process: every rank), in rank order.
    pub fn read_output<T: Element>(&mut self, shape: &TypedShape<T>) -> Result<Vec<Vec<T>>> {
        let regions: Vec<_> = self.local_ranks().map(|r| (r, shape.output(r))).collect();
        self.read_regions::<T>(&regions)
    }

    /// The input of `shape`'s call of every local rank, as it is now.
    pub fn read_input<T: Element>(&mut self, shape: &TypedShape<T>) -> Result<Vec<Vec<T>>> {
        let regions: Vec<_> = self.local_ranks().map(|r| (r, shape.input(r))).collect();
        self.read_regions::<T>(&regions)
    }

    /// Each (rank, region)'s elements, read together.
    fn read_regions<T: Element>(
        &mut self,
        regions: &[(usize, crate::plan::Region)],
    ) -> Result<Vec<Vec<T>>> {
        let size = T::DTYPE.size();
        let mut outs: Vec<Vec<T>> = regions
            .iter()
            .map(|(r, region)| {
                crate::sys::proc::zeroed::<T>(
                    region.len(),
                    &format!("rank {r}'s copy of its output"),
                )
            })
            .collect::<Result<_>>()?;
        let mut reads: Vec<HostRead<'_>> = regions
            .iter()
            .zip(outs.iter_mut())
            .map(|((r, region), out)| HostRead {
                rank: *r,
                id: Binding::DEFAULT.id(region.buf),
                offset: region.range.start * size,
                out: as_bytes_mut(out),
            })
            .collect();
        self.read_all(&mut reads)?;
        Ok(outs)
    }
}

/// The poison byte for `T`: all bits set (NaN for every float type); for
/// integers 0x5A, a value far from the small exact inputs' sums.
fn poison_byte<T: Element>() -> u8 {
    if T::DTYPE.is_float() {
        0xFF
    } else {
        0x5A
    }
}
