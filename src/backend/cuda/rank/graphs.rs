//! CUDA graphs of a rank: per-GPU capture and replay, and the joint capture across every GPU.

use super::*;

impl<'id> Rank<'id> {
    /// Drain the streams, then capture what `body` issues on the compute
    /// stream into a graph. The capture is always ended, also after an error
    /// inside it.
    pub(super) fn capture_with(
        &mut self,
        body: impl FnOnce(&mut Self) -> Result<()>,
    ) -> Result<Graph<'id>> {
        let e = self.err();
        self.sync()?;
        self.lanes[0].begin_capture().map_err(&e)?;
        let r = body(self);
        let g = self.lanes[0].end_capture().map_err(&e);
        r?;
        g
    }

    /// Capture `calls` (device-ordered plans) into this rank's graph.
    pub fn capture(&mut self, calls: &[Call], board: &SignalBoard) -> Result<()> {
        self.graphs.graph = None;
        let g = self.capture_with(|me| {
            me.graphs.capturing = Capturing::PerGpu;
            let r = calls.iter().try_for_each(|c| me.issue(c, board, 1, 0));
            me.graphs.capturing = Capturing::No;
            r
        })?;
        self.graphs.graph = Some(g);
        Ok(())
    }

    pub fn replay(&self) -> Result<()> {
        let g = self
            .graphs
            .graph
            .as_ref()
            .ok_or_else(|| Error::internal(format!("rank {}: no graph captured", self.rank)))?;
        self.lanes[0].launch_graph(g).map_err(self.err())
    }

    pub fn drop_graphs(&mut self) {
        self.graphs.graph = None;
        self.graphs.joint = None;
    }

    /// This rank's hand-over event, for the other ranks.
    pub fn handoff_token(&self) -> RemoteEvent {
        self.graphs.handoff.export()
    }

    /// Make lane 0 wait for everything issued on lane 1 so far.
    pub(super) fn join_lanes(&self) -> Result<()> {
        let e = self.err();
        self.lanes[1].record(&self.graphs.lane_ev[1]).map_err(&e)?;
        self.lanes[0]
            .wait_local(&self.graphs.lane_ev[1])
            .map_err(&e)
    }

    /// Make lane 1 wait for everything issued on lane 0 so far.
    pub(super) fn fork_lanes(&self) -> Result<()> {
        let e = self.err();
        self.lanes[0].record(&self.graphs.lane_ev[0]).map_err(&e)?;
        self.lanes[1]
            .wait_local(&self.graphs.lane_ev[0])
            .map_err(&e)
    }

    /// The other rank `r`'s hand-over event.
    pub(super) fn handoff_of(&self, r: usize) -> Result<&RemoteEvent> {
        self.peers
            .handoff
            .get(r)
            .ok_or_else(|| Error::internal(format!("no hand-over event of rank {r}")))
    }

    /// One joint capture of `calls` across every rank: rank 0 begins a
    /// capture on its compute lane and records its hand-over event; every
    /// other rank's compute lane waits on it (so it joins the capture, on
    /// its own device); every rank forks its copy lane from its compute
    /// lane, issues the calls exactly as for a plain launch (events between
    /// lanes and ranks become the graph's edges), joins its lanes again and
    /// hands over to rank 0, which waits on every rank and ends the capture:
    /// one graph whose nodes run on every GPU. Only rank 0 keeps it.
    ///
    /// `jb` orders the hand-overs on the host (signal 0: rank 0 began;
    /// signal 1 + r: rank r finished); `gens` are the calls' board
    /// generations.
    pub fn capture_joint(
        &mut self,
        calls: &[Call],
        board: &SignalBoard,
        gens: &[u64],
        jb: &SignalBoard,
        jgen: u64,
    ) -> Result<()> {
        let e = self.err();
        let r = self.rank;
        let n = self.peers.handoff.len();
        self.graphs.graph = None;
        self.graphs.joint = None;
        let mut pre = self.sync();
        if r == 0 && pre.is_ok() {
            pre = self.lanes[0].begin_joint_capture().map_err(&e);
        }
        if let Err(err) = pre {
            // Nothing of this rank joined a capture: release the others.
            jb.fail(jgen, r, &err.to_string());
            jb.publish(if r == 0 { 1 + 2 * n } else { 1 + n + r }, jgen);
            return Err(err);
        }
        let body = |me: &mut Self| -> Result<()> {
            if r == 0 {
                me.lanes[0].record(&me.graphs.handoff).map_err(&e)?;
                jb.publish(0, jgen);
            } else {
                jb.wait(0, jgen, r, &|| {
                    "rank 0's start of a joint graph capture".into()
                })?;
                me.lanes[0].wait(me.handoff_of(0)?).map_err(&e)?;
            }
            me.fork_lanes()?;
            me.graphs.capturing = Capturing::Joint;
            let issued = calls
                .iter()
                .zip(gens)
                .try_for_each(|(c, &g)| me.issue(c, board, g, 0));
            me.graphs.capturing = Capturing::No;
            issued?;
            me.join_lanes()?;
            if r != 0 {
                me.lanes[0].record(&me.graphs.handoff).map_err(&e)?;
                jb.publish(1 + r, jgen);
            } else {
                for k in 1..n {
                    jb.wait(1 + k, jgen, r, &|| {
                        format!("rank {k}'s end of a joint graph capture")
                    })?;
                    me.lanes[0].wait(me.handoff_of(k)?).map_err(&e)?;
                }
            }
            Ok(())
        };
        let done = body(self);
        if let Err(err) = &done {
            jb.fail(jgen, r, &err.to_string());
        }
        // Clean-up hand-shake, also after an error: every rank says it has
        // stopped issuing into the capture (slot 1 + n + r); rank 0 ends the
        // capture only then (its streams own it; ending it while another
        // thread still issues into a joined stream is undefined in the
        // driver), and says so (slot 1 + 2n); the others touch their streams
        // again only after that (a synchronize on a stream still joined to a
        // capture would invalidate it).
        let ended = 1 + 2 * n;
        if r == 0 {
            let mut settled = Ok(());
            for k in 1..n {
                if settled.is_ok() {
                    settled = jb.wait_settled(1 + n + k, jgen, r, &|| {
                        format!("rank {k} to stop issuing into the joint capture")
                    });
                }
            }
            let g = self.lanes[0].end_capture().map_err(&e);
            jb.publish(ended, jgen);
            done?;
            settled?;
            self.graphs.joint = Some(g?);
            Ok(())
        } else {
            jb.publish(1 + n + r, jgen);
            let ended =
                jb.wait_settled(ended, jgen, r, &|| "rank 0 to end the joint capture".into());
            done.and(ended)
        }
    }

    /// One replay of the joint graph: every rank's lanes hand over to rank
    /// 0, which waits on all of them, launches the graph and hands back; every
    /// rank's lanes wait on that before anything else runs on them.
    pub fn replay_joint(&mut self, jb: &SignalBoard, jgen: u64) -> Result<()> {
        let e = self.err();
        let r = self.rank;
        let n = self.peers.handoff.len();
        let body = |me: &mut Self| -> Result<()> {
            me.join_lanes()?;
            if r != 0 {
                me.lanes[0].record(&me.graphs.handoff).map_err(&e)?;
                jb.publish(1 + r, jgen);
                jb.wait(0, jgen, r, &|| "rank 0's launch of the joint graph".into())?;
                let h = me.handoff_of(0)?;
                me.lanes[0].wait(h).map_err(&e)?;
                me.lanes[1].wait(h).map_err(&e)?;
            } else {
                for k in 1..n {
                    jb.wait(1 + k, jgen, r, &|| {
                        format!("rank {k}'s hand-over before a joint replay")
                    })?;
                    me.lanes[0].wait(me.handoff_of(k)?).map_err(&e)?;
                }
                let g = me
                    .graphs
                    .joint
                    .as_ref()
                    .ok_or_else(|| Error::internal("rank 0: no joint graph captured"))?;
                me.lanes[0].launch_graph(g).map_err(&e)?;
                me.lanes[0].record(&me.graphs.handoff).map_err(&e)?;
                jb.publish(0, jgen);
                me.lanes[1].wait_local(&me.graphs.handoff).map_err(&e)?;
            }
            Ok(())
        };
        let done = body(self);
        if let Err(err) = &done {
            jb.fail(jgen, r, &err.to_string());
        }
        done
    }
}
