//! Timing and traffic of a rank: clock anchors, per-op times, bytes moved.

use super::activity::RankTiming;
#[cfg(feature = "profiling")]
use super::activity::TimingSource;
use super::*;

#[cfg(feature = "profiling")]
mod cupti;

/// The step times one LL kernel of a timed call wrote (its op `op` of
/// `parts` parts, two per step): `%globaltimer` at its start, after step
/// 0's put and at the end of each step, by block 0's thread 0.
pub(super) struct StepTimes {
    op: usize,
    parts: usize,
    pub(super) buf: HostMapped,
}

impl StepTimes {
    /// Its parts' spans in host ns ([`step_spans`] of its words).
    fn spans(&self, end: f64) -> Option<Vec<(f64, f64)>> {
        let w: Vec<u64> = (0..self.parts / 2 + 2)
            .map(|i| self.buf.load_u64(i))
            .collect();
        step_spans(&w, end)
    }
}

/// The spans of an LL kernel's parts from its step times `w` (K + 2 words:
/// its start, step 0's put done, the end of each of its K steps), in host
/// ns, anchored at the op's end `end`: part 2k is step k's put, part 2k + 1
/// its receive. A put after step 0 runs fused with the receive of the step
/// before (each line received is forwarded at once), so it shares that
/// span. `None` when the words are not one run of the kernel (a zero: the
/// kernel gave up or never ran; or a decrease).
fn step_spans(w: &[u64], end: f64) -> Option<Vec<(f64, f64)>> {
    let k = w.len().checked_sub(2)?;
    if w.contains(&0) || w.windows(2).any(|p| p[1] < p[0]) {
        return None;
    }
    let last = w[k + 1];
    let at = |x: u64| end - (last - x) as f64;
    // Part p spans words i..i+1, i = ceil(p / 2): step 0's put (0, 1), step
    // j's receive (j + 1, j + 2), and step j's put beside step j-1's
    // receive (j, j + 1).
    Some(
        (0..2 * k)
            .map(|p| {
                let i = p.div_ceil(2);
                (at(w[i]), at(w[i + 1]))
            })
            .collect(),
    )
}

impl<'id> Rank<'id> {
    /// A zeroed buffer for the step times of LL kernel op `op` of `parts`
    /// parts (a spare one if it fits).
    pub(super) fn step_times(&mut self, op: usize, parts: usize) -> Result<StepTimes> {
        let words = parts / 2 + 2;
        let buf = match self
            .instr
            .spare_stamps
            .iter()
            .position(|b| b.words() >= words)
        {
            Some(i) => self.instr.spare_stamps.swap_remove(i),
            None => self.ctx.host_mapped(8 * words).map_err(self.err())?,
        };
        for i in 0..words {
            buf.store_u64(i, 0);
        }
        Ok(StepTimes { op, parts, buf })
    }

    /// Give op times from the kernels' own step times where they wrote
    /// them (each LL kernel's parts otherwise share its op's span).
    fn apply_step_times(&mut self, v: &mut [OpTime], stamps: Vec<StepTimes>) {
        for st in stamps {
            let end = v
                .iter()
                .filter(|t| t.op == st.op)
                .map(|t| t.end_ns)
                .reduce(f64::max);
            if let Some(spans) = end.and_then(|e| st.spans(e)) {
                for t in v.iter_mut().filter(|t| t.op == st.op) {
                    if let Some(&(a, b)) = spans.get(t.part) {
                        (t.start_ns, t.end_ns) = (a, b);
                    }
                }
            }
            self.instr.spare_stamps.push(st.buf);
        }
    }

    /// Relate this GPU's event clock to the host clock (streams idle): record
    /// a timing event on an idle stream and spin until it completes, a few
    /// times; the GPU wrote its timestamp between the host's reading just
    /// before the record and just after the completion, so the tightest such
    /// bracket places it. Returns the event, the bracket's midpoint (host ns
    /// since `epoch`) and its half-width (ns).
    pub(super) fn anchor(&self, epoch: Instant) -> Result<(TimingEvent<'id>, f64, f64)> {
        let e = self.err();
        self.sync()?;
        let limit = self.timeout + Duration::from_secs(5);
        let mut best: Option<(TimingEvent<'id>, f64, f64)> = None;
        for _ in 0..ANCHOR_TRIES {
            let ev = self.ctx.timing_event().map_err(&e)?;
            let t0 = Instant::now();
            self.lanes[0].record_timing(&ev).map_err(&e)?;
            self.wait_stream(&self.lanes[0], limit, &e)?;
            let t1 = Instant::now();
            let lo = t0.duration_since(epoch).as_secs_f64() * 1e9;
            let hi = t1.duration_since(epoch).as_secs_f64() * 1e9;
            let half = (hi - lo) / 2.0;
            if best.as_ref().is_none_or(|b| half < b.2) {
                best = Some((ev, lo + half, half));
            }
        }
        best.ok_or_else(|| Error::Worker {
            rank: self.rank,
            message: "no clock anchor event was recorded for the timeline".into(),
        })
    }

    /// The op timings of the timed calls since the last take, in host ns
    /// since `epoch` (after a synchronize), each with its source, and the
    /// half-width of this rank's clock alignment (ns).
    pub fn take_timing(&mut self, epoch: Instant) -> Result<RankTiming> {
        let timing = std::mem::take(&mut self.instr.timing);
        self.take_of(timing, epoch)
    }

    /// [`Rank::take_timing`] of the timed NCCL calls (one op each).
    #[cfg(feature = "nccl")]
    pub fn take_nccl_timing(&mut self, epoch: Instant) -> Result<RankTiming> {
        let timing = std::mem::take(&mut self.instr.nccl_timing);
        self.take_of(timing.into_iter().map(|t| (t, Vec::new())).collect(), epoch)
    }

    fn take_of(
        &mut self,
        timing: Vec<(Timed<'id>, Vec<StepTimes>)>,
        epoch: Instant,
    ) -> Result<RankTiming> {
        if timing.is_empty() {
            return Ok((Vec::new(), 0.0));
        }
        #[cfg(feature = "profiling")]
        let cupti = cupti::pending(timing.iter().map(|(t, _)| t));
        let r = self.timed_spans(timing, epoch);
        // Every CUPTI call is taken, whatever the outcome: the kinds go off
        // when no rank has one pending.
        #[cfg(feature = "profiling")]
        if let Some((c, n)) = cupti {
            c.end(n).map_err(|m| self.cupti_err(m))?;
        }
        r
    }

    /// [`Rank::take_timing`] of the calls `timing`.
    fn timed_spans(
        &mut self,
        timing: Vec<(Timed<'id>, Vec<StepTimes>)>,
        epoch: Instant,
    ) -> Result<RankTiming> {
        let events = timing.iter().any(|(t, _)| matches!(t, Timed::Events(..)));
        let anchor = if events {
            Some(self.anchor(epoch)?)
        } else {
            None
        };
        #[cfg_attr(not(feature = "profiling"), allow(unused_mut))]
        let mut half = anchor.as_ref().map_or(0.0, |a| a.2);
        #[cfg(feature = "profiling")]
        let cupti = self.cupti_records(timing.iter().map(|(t, _)| t), epoch)?;
        #[cfg(feature = "profiling")]
        if let Some(c) = &cupti {
            half = half.max(c.half);
        }
        let mut out = Vec::with_capacity(timing.len());
        for (call, stamps) in timing {
            match (call, &anchor) {
                (Timed::Events(tc, why), Some(a)) => {
                    let mut v = self.event_spans(&tc, (&a.0, a.1))?;
                    self.apply_step_times(&mut v, stamps);
                    out.push((v, why));
                    self.instr.spare_events.extend(tc.events);
                }
                #[cfg(feature = "profiling")]
                (Timed::Cupti(cc, _, issued), _) => {
                    let c = cupti
                        .as_ref()
                        .ok_or_else(|| Error::internal("timed call without its clock"))?;
                    let mut v = self.cupti_spans(cc, issued, c, epoch)?;
                    self.apply_step_times(&mut v, stamps);
                    out.push((v, TimingSource::cupti(c.kinds)));
                }
                _ => return Err(Error::internal("timed call without its clock")),
            }
        }
        Ok((out, half))
    }

    /// The op times of one event-timed call, through the clock anchor
    /// (its event and host time).
    fn event_spans(
        &self,
        call: &TimedCall<'id>,
        (anchor, at): (&TimingEvent<'id>, f64),
    ) -> Result<Vec<OpTime>> {
        let e = self.err();
        let ev = &call.events;
        let base = ev.first().ok_or_else(|| Error::Worker {
            rank: self.rank,
            message: "a timed call without its base event".into(),
        })?;
        // Host time of the call's base event; every op relative to it
        // (short intervals keep the f32 milliseconds exact to ns).
        let t_base = at - f64::from(base.elapsed_ms(anchor).map_err(&e)?) * 1e6;
        // Each event once, relative to the base.
        let mut rel = Vec::with_capacity(ev.len());
        for x in ev {
            rel.push(t_base + f64::from(base.elapsed_ms(x).map_err(&e)?) * 1e6);
        }
        let mut v = Vec::new();
        for &(op, parts, (a0, a1), b) in &call.spans {
            // The latest of the events that mark the start.
            let start = call
                .starts
                .get(a0..a1)
                .unwrap_or(&[])
                .iter()
                .filter_map(|&k| rel.get(k).copied())
                .reduce(f64::max);
            let (start, end) = match (start, rel.get(b)) {
                (Some(s), Some(t)) => (s, *t),
                _ => {
                    return Err(Error::Worker {
                        rank: self.rank,
                        message: format!("timing event of op {op} missing"),
                    })
                }
            };
            for part in 0..parts {
                v.push(OpTime {
                    rank: self.rank,
                    op,
                    part,
                    start_ns: start,
                    end_ns: end,
                });
            }
        }
        Ok(v)
    }

    /// A timing event: a spare one if any (every spare was recorded and read
    /// already; recording again resets it), else a new one.
    pub(super) fn timing_event(&mut self) -> Result<TimingEvent<'id>> {
        match self.instr.spare_events.pop() {
            Some(ev) => Ok(ev),
            None => self.ctx.timing_event().map_err(self.err()),
        }
    }

    /// Bytes moved by this rank's issued work since the last take, per rank.
    pub fn take_traffic(&mut self) -> Vec<Traffic> {
        std::mem::take(&mut self.instr.traffic)
    }
}

#[cfg(test)]
mod tests;
