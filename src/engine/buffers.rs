//! The engine's buffers: reserve, allocate, free, write and read them, and
//! the memory check before any allocation.

use super::*;

impl Core {
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
    pub fn check_memory(&self, bytes: &[usize], what: &str) -> Result<()> {
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
    pub fn alloc(&mut self, bytes: &[usize]) -> Result<BufId> {
        let id = BufId(self.next_id);
        self.next_id += 1;
        self.reserve(id, bytes)?;
        Ok(id)
    }

    /// Free an engine buffer allocated with [`Core::alloc`].
    pub fn free(&mut self, id: BufId) -> Result<()> {
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
    pub fn check_rank(&self, r: usize) -> Result<()> {
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
        self.check_rank(r)?;
        self.usable()?;
        self.last = None;
        let res = self.backend.write(r, id, offset, data);
        self.track(res)
    }

    /// Copy rank `r`'s buffer `id` from byte `offset` into `out`.
    pub fn read(&mut self, r: usize, id: BufId, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check_rank(r)?;
        let res = self.backend.read(r, id, offset, out);
        self.track(res)
    }
}
