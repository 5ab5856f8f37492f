//! The network hop of a rank in a job over nodes (`backend/cuda/net.rs`
//! is the port it goes through): a copy into a rank of another node is a
//! send of one put, a wait on such a rank lands the puts received so far,
//! and a signal such a rank waits on is sent to it once complete. Each
//! step is bounded by the job's timeout and names its op.

use super::issue::{ns, wait_board, StepAt};
use super::lower::Addr;
use super::*;
use crate::plan::SignalId;

impl<'id> Rank<'id> {
    /// The port to the other nodes.
    fn port(&self) -> Result<Arc<super::super::net::NetPort>> {
        self.net
            .clone()
            .ok_or_else(|| Error::internal("no network port"))
    }

    /// Receiving side: wait (on the host) until this node's board has
    /// `signal` (of a rank on another node), then land every put of
    /// the call received so far in this rank's buffers (host to device,
    /// complete on return), before any later work. A put is filed before
    /// its signal is raised, and a sender's messages are filed in order, so
    /// whatever the signal follows has landed.
    pub(super) fn land(
        &mut self,
        signal: SignalId,
        at: &StepAt,
        p: &mut IssueProfile,
    ) -> Result<()> {
        wait_board(signal, at, p)?;
        let net = self.port()?;
        let t = Instant::now();
        let what = || signal_desc(at.plan, signal);
        net.wait_delivered(at.gen, signal.0, at.rank, self.timeout, &|| {
            at.board.check(at.rank, &what)
        })
        .map_err(|e| at.in_step(e))?;
        for put in net.take_all(at.gen) {
            self.write(put.buf, put.offset, put.data())
                .map_err(|e| at.in_step(e.in_step(&format!("landing rank {}'s put", put.from))))?;
            net.recycle(put.msg);
        }
        p.copy_ns += ns(t);
        Ok(())
    }

    /// Sending side of a copy: once `lane` reached it (its producers are
    /// done), read the source to the host and send it as one put, with the
    /// copy's signal.
    pub(super) fn send(
        &self,
        lane: usize,
        (src, dst, bytes, signal): (Addr, Addr, usize, Option<SignalId>),
        at: &StepAt,
    ) -> Result<()> {
        let net = self.port()?;
        self.lane_done(lane, at)?;
        // Staged in the port's buffers, reused from step to step; a copy
        // longer than one message goes as several, in order, its signal
        // with the last.
        let mut stage = net.stage();
        let (data, msg) = &mut *stage;
        for (a, b, last) in crate::transport::pieces(bytes, net.wire.put_max()) {
            data.resize(b - a, 0);
            self.read_into(src.buf, src.offset + a, data)
                .map_err(|e| at.in_step(e))?;
            net.wire.put_message(
                self.rank,
                dst.rank,
                dst.buf,
                dst.offset + a,
                signal.filter(|_| last).map(|s| s.0),
                at.gen,
                data,
                msg,
            );
            *msg = net
                .wire
                .send_put(self.rank, dst.rank, std::mem::take(msg))
                .map_err(|e| at.in_step(e))?;
        }
        Ok(())
    }

    /// Sending side of a signal: once the work before it on `lane` is
    /// complete, send signal `s` to every rank of another node that waits
    /// on it (each must receive it itself: see `transport/net.rs`).
    pub(super) fn forward(
        &self,
        s: SignalId,
        to: &[usize],
        lane: usize,
        at: &StepAt,
        p: &mut IssueProfile,
    ) -> Result<()> {
        let net = self.port()?;
        let t = Instant::now();
        self.lane_done(lane, at)?;
        for &x in to {
            net.wire
                .signal(at.rank, x, s.0, at.gen)
                .map_err(|e| at.in_step(e))?;
        }
        p.peer_ns += ns(t);
        Ok(())
    }
}
