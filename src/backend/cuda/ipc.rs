//! What a CUDA rank thread does for CUDA IPC, one rank per process: export
//! its buffers, exchange flags and events as IPC handles, and open its
//! peers'. Kept apart from [`super::rank`] (the rank's issue path, which is
//! the same in both modes): the tokens opened here are the same
//! [`PeerBuf`] and [`RemoteEvent`] the issue path already uses.

use super::rank::Rank;
use crate::backend::BufId;
use crate::cuda::{IpcEventHandle, IpcMemHandle, PeerBuf, RemoteEvent};
use crate::error::{Error, Result};
use std::time::{Duration, Instant};

/// A rank's buffer as it is announced to the other processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Exported {
    pub handle: Option<IpcMemHandle>,
    pub bytes: usize,
    pub device: usize,
}

impl Exported {
    pub const LEN: usize = 1 + 64 + 8 + 8;

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(Self::LEN);
        v.push(u8::from(self.handle.is_some()));
        v.extend_from_slice(&self.handle.map_or([0; 64], |h| h.0));
        v.extend_from_slice(&(self.bytes as u64).to_le_bytes());
        v.extend_from_slice(&(self.device as u64).to_le_bytes());
        v
    }

    pub fn decode(b: &[u8]) -> Result<Exported> {
        if b.len() != Self::LEN {
            return Err(Error::internal(format!(
                "an IPC buffer record of {} bytes",
                b.len()
            )));
        }
        let word = |at: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[at..at + 8]);
            u64::from_le_bytes(x) as usize
        };
        let mut h = [0u8; 64];
        h.copy_from_slice(&b[1..65]);
        Ok(Exported {
            handle: (b[0] == 1).then_some(IpcMemHandle(h)),
            bytes: word(65),
            device: word(73),
        })
    }
}

impl Rank<'_> {
    /// The exchange flags, for the other processes.
    pub(super) fn export_flags(&self) -> Result<Exported> {
        Ok(Exported {
            handle: self.flags.ipc_handle().map_err(self.ipc_err())?,
            bytes: self.flags.len(),
            device: self.device,
        })
    }

    /// Buffer `id`, for the other processes.
    pub(super) fn export_buf(&self, id: BufId) -> Result<Exported> {
        let b = self
            .bufs
            .get(&id)
            .ok_or_else(|| Error::Plan(format!("rank {} has no buffer {}", self.rank, id.0)))?;
        Ok(Exported {
            handle: b.ipc_handle().map_err(self.ipc_err())?,
            bytes: b.len(),
            device: self.device,
        })
    }

    /// This rank's own token of buffer `id`.
    pub(super) fn own_token(&self, id: BufId) -> Result<PeerBuf> {
        self.bufs
            .get(&id)
            .map(|b| b.export())
            .ok_or_else(|| Error::Plan(format!("rank {} has no buffer {}", self.rank, id.0)))
    }

    /// Open another process's buffer in this rank's context.
    pub(super) fn open_buf(&self, x: &Exported) -> Result<PeerBuf> {
        self.ctx
            .open_ipc(x.handle.as_ref(), x.bytes, x.device)
            .map_err(self.ipc_err())
    }

    /// Make at least `n` interprocess events (the issue path records them
    /// like any event); returns the handles of events `from..`.
    pub(super) fn grow_ipc_events(&mut self, n: usize, from: usize) -> Result<Vec<IpcEventHandle>> {
        let e = self.ipc_err();
        while self.events.len() < n {
            let ev = self.ctx.ipc_event().map_err(&e)?;
            self.events.push(ev);
        }
        let local = self.local_events.get_or_insert_with(Vec::new);
        while local.len() < n {
            local.push(self.ctx.event().map_err(&e)?);
        }
        self.events
            .iter()
            .skip(from)
            .map(|ev| ev.ipc_handle().map_err(&e))
            .collect()
    }

    /// This rank's own event tokens `from..` (for `remote[self.rank]`).
    pub(super) fn own_events(&self, from: usize) -> Vec<RemoteEvent> {
        self.events.iter().skip(from).map(|e| e.export()).collect()
    }

    /// Open another process's events.
    pub(super) fn open_events(&self, handles: &[IpcEventHandle]) -> Result<Vec<RemoteEvent>> {
        let e = self.ipc_err();
        handles
            .iter()
            .map(|h| self.ctx.open_ipc_event(h).map_err(&e))
            .collect()
    }

    /// Whether both lanes are idle within `limit` (spinning, then napping),
    /// so the caller can look at the job's health between tries instead of
    /// blocking for the whole timeout on work a dead peer will never
    /// release.
    pub(super) fn idle_within(&self, limit: Duration) -> Result<bool> {
        let start = Instant::now();
        let mut i: u32 = 0;
        loop {
            let mut idle = true;
            for s in &self.lanes {
                if !s.is_idle().map_err(self.ipc_err())? {
                    idle = false;
                    break;
                }
            }
            if idle {
                return Ok(true);
            }
            if start.elapsed() > limit {
                return Ok(false);
            }
            i = i.wrapping_add(1);
            if i < 2000 {
                std::hint::spin_loop();
            } else if i < 4000 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    fn ipc_err(&self) -> impl Fn(crate::cuda::CudaError) -> Error {
        super::cuda_err(self.rank, self.device)
    }
}

#[cfg(test)]
mod tests;
