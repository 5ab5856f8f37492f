//! A host call's copies reach the backend together: one batch of writes
//! (every local rank's input) and one batch of reads (every local rank's
//! output) per call, on a backend that cannot run on the caller's slices,
//! so that a backend with a thread per rank makes each in one round.

use super::*;
use crate::backend::{Backend, BackendInfo, Call, DeviceMemory, HostRead, HostWrite};
use crate::engine::EngineConfig;
use crate::sync::AbortHandle;
use std::sync::{Arc, Mutex};

/// Each batch of host copies: its direction and its ranks.
type Log = Arc<Mutex<Vec<(&'static str, Vec<usize>)>>>;

/// The CPU backend without lent slices, recording the ranks of each batch
/// of host copies it is given.
struct Copies {
    cpu: crate::backend::cpu::CpuBackend,
    log: Log,
}

impl Backend for Copies {
    fn info(&self) -> &BackendInfo {
        self.cpu.info()
    }
    fn reserve(&mut self, id: crate::backend::BufId, bytes: &[usize]) -> Result<()> {
        self.cpu.reserve(id, bytes)
    }
    fn release(&mut self, id: crate::backend::BufId) -> Result<()> {
        self.cpu.release(id)
    }
    fn write(&mut self, writes: &[HostWrite<'_>]) -> Result<()> {
        let ranks = writes.iter().map(|w| w.rank).collect();
        self.log.lock().unwrap().push(("write", ranks));
        self.cpu.write(writes)
    }
    fn read(&mut self, reads: &mut [HostRead<'_>]) -> Result<()> {
        let ranks = reads.iter().map(|r| r.rank).collect();
        self.log.lock().unwrap().push(("read", ranks));
        self.cpu.read(reads)
    }
    fn launch(&mut self, call: &Call) -> Result<()> {
        self.cpu.launch(call)
    }
    fn synchronize(&mut self) -> Result<()> {
        self.cpu.synchronize()
    }
    fn abort_handle(&self) -> AbortHandle {
        self.cpu.abort_handle()
    }
    fn memory(&self) -> Result<Vec<Option<DeviceMemory>>> {
        self.cpu.memory()
    }
    fn ping(&mut self) -> Result<()> {
        self.cpu.ping()
    }
}

#[test]
fn a_host_call_copies_in_one_batch_and_out_in_one() {
    let n = 4;
    let cfg = EngineConfig::cpu(n);
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let cpu = crate::backend::cpu::CpuBackend::new(n, cfg.timeout, cfg.faults.clone()).unwrap();
    let mut e = Engine::with_backend(
        Box::new(Copies {
            cpu,
            log: log.clone(),
        }),
        &cfg,
        None,
        None,
    );
    let all: Vec<usize> = (0..n).collect();
    // Out of place, then in place (an all-gather reads each rank's own
    // slice of its buffer), twice each: the second call of a cached plan
    // copies the same way.
    for (collective, in_place, count) in [
        (Collective::AllReduce, false, 6),
        (Collective::AllReduce, false, 6),
        (Collective::AllGather, true, 3),
        (Collective::ReduceScatter, false, 2),
    ] {
        log.lock().unwrap().clear();
        let len_in = match collective {
            Collective::ReduceScatter => count * n,
            _ => count,
        };
        let len_out = match collective {
            Collective::AllGather => count * n,
            _ => count,
        };
        let inputs: Vec<Vec<f32>> = (0..n).map(|r| vec![r as f32 + 1.0; len_in]).collect();
        let mut outs: Vec<Vec<f32>> = if in_place {
            (0..n).map(|r| vec![r as f32 + 1.0; len_out]).collect()
        } else {
            vec![vec![0.0; len_out]; n]
        };
        let send: Vec<&[f32]> = if in_place {
            Vec::new()
        } else {
            inputs.iter().map(|v| &v[..]).collect()
        };
        let mut recv: Vec<&mut [f32]> = outs.iter_mut().map(|v| &mut v[..]).collect();
        e.host(
            HostCall::new(collective, in_place, ReduceOp::Sum),
            &send,
            &mut recv,
        )
        .unwrap();
        let got = log.lock().unwrap().clone();
        assert_eq!(
            got,
            vec![("write", all.clone()), ("read", all.clone())],
            "{collective} in place {in_place}"
        );
        if collective == Collective::AllReduce {
            assert!(outs.iter().all(|o| o == &vec![10.0; count]), "{outs:?}");
        }
    }
}
