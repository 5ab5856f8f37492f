//! [`Verdict`]: the outcome of a check, per rank, and how it travels between processes.

/// Outcome of a check.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Verdict {
    /// Wrong elements per rank.
    pub wrong: Vec<u64>,
    /// Largest absolute error seen (infinite for a NaN mismatch).
    pub max_abs_err: f64,
    /// Largest error relative to the expected value, over elements whose
    /// expected value is finite and non-zero.
    pub max_rel_err: f64,
    /// Whether the comparison was bitwise.
    pub bitwise: bool,
    /// First wrong element, for the message: (rank, index, got, expected).
    pub first_wrong: Option<(usize, usize, f64, f64)>,
}

impl Verdict {
    pub fn total_wrong(&self) -> u64 {
        self.wrong.iter().sum()
    }
    pub fn passed(&self) -> bool {
        self.total_wrong() == 0
    }

    /// The verdict of outputs whose first is rank `base`'s (a process of a
    /// multi-process job checks its own rank): `first_wrong` names the
    /// rank.
    pub fn at_rank(mut self, base: usize) -> Verdict {
        if let Some(f) = &mut self.first_wrong {
            f.0 += base;
        }
        self
    }

    /// Bytes for [`Verdict::decode`] (to gather the verdicts of a job's
    /// processes).
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::new();
        let mut word = |x: u64| v.extend_from_slice(&x.to_le_bytes());
        word(self.wrong.len() as u64);
        for &w in &self.wrong {
            word(w);
        }
        word(self.max_abs_err.to_bits());
        word(self.max_rel_err.to_bits());
        word(u64::from(self.bitwise));
        match self.first_wrong {
            Some((r, i, g, w)) => {
                word(1);
                word(r as u64);
                word(i as u64);
                word(g.to_bits());
                word(w.to_bits());
            }
            None => word(0),
        }
        v
    }

    /// The verdict [`Verdict::encode`] wrote, if `b` is one.
    pub fn decode(b: &[u8]) -> Option<Verdict> {
        let words: Vec<u64> = b
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect();
        let mut it = words.into_iter();
        let n = it.next()? as usize;
        let wrong: Vec<u64> = (0..n).map(|_| it.next()).collect::<Option<_>>()?;
        let max_abs_err = f64::from_bits(it.next()?);
        let max_rel_err = f64::from_bits(it.next()?);
        let bitwise = it.next()? == 1;
        let first_wrong = match it.next()? {
            1 => Some((
                it.next()? as usize,
                it.next()? as usize,
                f64::from_bits(it.next()?),
                f64::from_bits(it.next()?),
            )),
            _ => None,
        };
        Some(Verdict {
            wrong,
            max_abs_err,
            max_rel_err,
            bitwise,
            first_wrong,
        })
    }

    /// One verdict of the parts in rank order (each a process's ranks).
    pub fn join(parts: impl IntoIterator<Item = Verdict>) -> Verdict {
        let mut v = Verdict {
            bitwise: true,
            ..Verdict::default()
        };
        for p in parts {
            v.wrong.extend(p.wrong);
            v.max_abs_err = v.max_abs_err.max(p.max_abs_err);
            v.max_rel_err = v.max_rel_err.max(p.max_rel_err);
            v.bitwise &= p.bitwise;
            if v.first_wrong.is_none() {
                v.first_wrong = p.first_wrong;
            }
        }
        v
    }
}
