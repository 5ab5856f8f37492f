//! What a call asks for: the descriptor every rank's call carries, compared
//! across the ranks before any data moves (issue 32 item 5).
//!
//! The per-rank style compares descriptors as ranks arrive at the
//! rendezvous (`communicator::ranks`); one rank per process all-gathers
//! them through the job's control segment (`CallDesc::encode`). Either
//! way a difference is one [`Error::Mismatch`] for every rank, at once,
//! naming what each rank asked for, and nothing has moved.

use crate::element::{DataType, ReduceOp};
use crate::error::{Error, Result};
use crate::plan::Collective;

/// What kind of call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub(crate) enum CallKind {
    /// A collective on host slices.
    Host(Collective),
    /// A collective on device buffers allocated by the communicator.
    Device(Collective),
    /// Every rank waits for every other.
    Barrier,
    /// Device buffers allocated on every rank.
    Alloc,
    /// Device buffers freed on every rank.
    Free,
}

/// What one rank asks of a call: every rank of the call must ask the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) struct CallDesc {
    /// The kind of call.
    pub kind: CallKind,
    /// The element type (a barrier has none).
    pub dtype: Option<DataType>,
    /// The reduce op (only the reducing collectives have one).
    pub op: Option<ReduceOp>,
    /// Whether the call is in place.
    pub in_place: bool,
    /// NCCL's count: all-reduce and broadcast the elements in and out,
    /// reduce-scatter the elements out, all-gather the elements in; the
    /// elements per rank of an allocation.
    pub count: usize,
}

impl std::fmt::Display for CallDesc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            CallKind::Host(c) => write!(f, "{c}")?,
            CallKind::Device(c) => write!(f, "{c} on device buffers")?,
            CallKind::Barrier => return f.write_str("a barrier"),
            CallKind::Alloc => f.write_str("an allocation")?,
            CallKind::Free => f.write_str("freeing device buffers")?,
        }
        write!(f, " of {}", crate::words::counted(self.count, "element"))?;
        if let Some(t) = self.dtype {
            write!(f, " of {}", t.name())?;
        }
        if let Some(op) = self.op {
            write!(f, ", {}", op.name())?;
        }
        if matches!(self.kind, CallKind::Host(_) | CallKind::Device(_)) {
            f.write_str(if self.in_place {
                ", in place"
            } else {
                ", out of place"
            })?;
        }
        Ok(())
    }
}

/// The first word of an encoded descriptor ("RRCALL01").
const MAGIC: u64 = 0x3130_4c4c_4143_5252;
const WORDS: usize = 7;

impl CallDesc {
    /// A collective on host slices of `T`-sized elements of `dtype`.
    pub fn host(
        collective: Collective,
        dtype: DataType,
        op: ReduceOp,
        in_place: bool,
        count: usize,
    ) -> CallDesc {
        CallDesc {
            kind: CallKind::Host(collective),
            dtype: Some(dtype),
            op: collective.reduces().then_some(op),
            in_place,
            count,
        }
    }

    /// A host-slice call of `T` with NCCL's `count`.
    pub(crate) fn of_host<T: crate::element::Element>(
        c: crate::engine::HostCall,
        count: usize,
    ) -> CallDesc {
        CallDesc::host(c.collective, T::DTYPE, c.op, c.in_place, count)
    }

    /// The same call on device buffers.
    pub(crate) fn on_device(mut self) -> CallDesc {
        if let CallKind::Host(c) = self.kind {
            self.kind = CallKind::Device(c);
        }
        self
    }

    /// A barrier.
    pub fn barrier() -> CallDesc {
        CallDesc {
            kind: CallKind::Barrier,
            dtype: None,
            op: None,
            in_place: false,
            count: 0,
        }
    }

    /// An allocation or a free of `count` elements of `dtype` per rank.
    pub fn buffers(kind: CallKind, dtype: DataType, count: usize) -> CallDesc {
        CallDesc {
            kind,
            dtype: Some(dtype),
            op: None,
            in_place: false,
            count,
        }
    }

    /// [`Error::Mismatch`] unless every rank's descriptor (rank, what it
    /// asked) is the same; `asked` in rank order.
    pub fn agree(asked: &[(usize, CallDesc)]) -> Result<()> {
        let decoded: Vec<(usize, std::result::Result<CallDesc, String>)> =
            asked.iter().map(|&(r, d)| (r, Ok(d))).collect();
        agree_decoded(&decoded)
    }

    /// The descriptor as bytes, for the other processes of a job
    /// ([`CallDesc::decode`]).
    pub fn encode(&self) -> Vec<u8> {
        let (kind, collective) = match self.kind {
            CallKind::Host(c) => (1, Some(c)),
            CallKind::Device(c) => (2, Some(c)),
            CallKind::Barrier => (3, None),
            CallKind::Alloc => (4, None),
            CallKind::Free => (5, None),
        };
        let (coll, root) = match collective {
            None => (0, 0),
            Some(Collective::AllReduce) => (1, 0),
            Some(Collective::ReduceScatter) => (2, 0),
            Some(Collective::AllGather) => (3, 0),
            Some(Collective::Broadcast { root }) => (4, root as u64),
        };
        let code = |i: Option<usize>| i.map_or(0, |i| i as u64 + 1);
        let dtype = code(
            self.dtype
                .and_then(|t| DataType::ALL.iter().position(|&x| x == t)),
        );
        let op = code(
            self.op
                .and_then(|o| ReduceOp::ALL.iter().position(|&x| x == o)),
        );
        let words: [u64; WORDS] = [
            MAGIC,
            kind << 8 | coll,
            root,
            dtype,
            op,
            u64::from(self.in_place),
            self.count as u64,
        ];
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// The descriptor another process encoded; `Err` says what the bytes
    /// are instead (another step of the job paired with this call).
    pub fn decode(bytes: &[u8]) -> std::result::Result<CallDesc, String> {
        let not = || {
            "something else: not a collective call of this communicator (its process is at \
             another step of the job, e.g. a call through the engine underneath)"
                .to_string()
        };
        if bytes.len() != WORDS * 8 {
            return Err(not());
        }
        let w: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect();
        if w[0] != MAGIC {
            return Err(not());
        }
        let collective = match w[1] & 0xff {
            0 => None,
            1 => Some(Collective::AllReduce),
            2 => Some(Collective::ReduceScatter),
            3 => Some(Collective::AllGather),
            4 => Some(Collective::Broadcast {
                root: usize::try_from(w[2]).map_err(|_| not())?,
            }),
            _ => return Err(not()),
        };
        let kind = match (w[1] >> 8, collective) {
            (1, Some(c)) => CallKind::Host(c),
            (2, Some(c)) => CallKind::Device(c),
            (3, None) => CallKind::Barrier,
            (4, None) => CallKind::Alloc,
            (5, None) => CallKind::Free,
            _ => return Err(not()),
        };
        let pick = |code: u64, len: usize| -> std::result::Result<Option<usize>, String> {
            match code {
                0 => Ok(None),
                c if (c as usize) <= len => Ok(Some(c as usize - 1)),
                _ => Err(not()),
            }
        };
        Ok(CallDesc {
            kind,
            dtype: pick(w[3], DataType::ALL.len())?.map(|i| DataType::ALL[i]),
            op: pick(w[4], ReduceOp::ALL.len())?.map(|i| ReduceOp::ALL[i]),
            in_place: w[5] != 0,
            count: usize::try_from(w[6]).map_err(|_| not())?,
        })
    }
}

/// [`CallDesc::agree`] over descriptors some of which did not decode.
pub(crate) fn agree_decoded(
    asked: &[(usize, std::result::Result<CallDesc, String>)],
) -> Result<()> {
    let Some((_, first)) = asked.first() else {
        return Ok(());
    };
    match asked.iter().find(|(_, d)| d != first) {
        None if first.is_ok() => Ok(()),
        found => Err(Error::Mismatch {
            rank: found.map_or(asked[0].0, |&(r, _)| r),
            asked: asked
                .iter()
                .map(|(r, d)| {
                    (
                        *r,
                        match d {
                            Ok(d) => d.to_string(),
                            Err(what) => what.clone(),
                        },
                    )
                })
                .collect(),
        }),
    }
}

#[cfg(test)]
mod tests;
