use super::*;
use crate::plan::Collective;
use crate::EngineConfig;

/// Every collective and path, in and out of place, through the ordered
/// call on the CPU backend, against the plain call's result.
#[test]
fn every_collective_in_and_out_of_place_matches_the_plain_call() {
    for ranks in [2usize, 3] {
        for algo in [
            "auto",
            "ring",
            "ring:pipe2",
            "oneshot",
            "oneshot:flag",
            "ps",
        ] {
            let choice: AlgoChoice = algo.parse().unwrap();
            for collective in Collective::ALL {
                for in_place in [false, true] {
                    let shape = Shape {
                        collective,
                        ranks,
                        count: 37,
                        elem_size: 4,
                        in_place,
                    };
                    if choice.resolve(&shape).is_err() {
                        continue;
                    }
                    let mut e = Engine::new(EngineConfig::cpu(ranks)).unwrap();
                    let inputs: Vec<Vec<i32>> = (0..ranks)
                        .map(|r| {
                            (0..shape.input(r).len())
                                .map(|i| (i * 7 + r * 3) as i32 % 50)
                                .collect()
                        })
                        .collect();
                    let sh = e.load(collective, &inputs, in_place).unwrap();
                    e.run::<i32>(Some(&choice), &sh, ReduceOp::Sum).unwrap();
                    let want = e.read_output::<i32>(&sh).unwrap();
                    let sh = e.load(collective, &inputs, in_place).unwrap();
                    e.poison(&sh).unwrap();
                    let bind = Arc::new(vec![Binding::DEFAULT; ranks]);
                    let (_, done) = e
                        .launch_after(
                            Some(&choice),
                            *sh,
                            DataType::Int32,
                            ReduceOp::Sum,
                            bind,
                            &After::Work,
                            None,
                        )
                        .unwrap();
                    assert_eq!(done.len(), ranks);
                    assert!(done.iter().all(|d| d.is_complete().unwrap()));
                    assert_eq!(
                        e.read_output(&sh).unwrap(),
                        want,
                        "{algo} {collective} in place {in_place}"
                    );
                }
            }
        }
    }
}

/// A CPU backend that refuses stream-ordered calls the way the CUDA
/// backend over its IPC peer exchange does (which cannot run here).
struct OneRankPerProcess(crate::backend::cpu::CpuBackend);

impl crate::backend::Backend for OneRankPerProcess {
    fn info(&self) -> &crate::backend::BackendInfo {
        self.0.info()
    }
    fn reserve(&mut self, id: crate::backend::BufId, bytes: &[usize]) -> Result<()> {
        self.0.reserve(id, bytes)
    }
    fn release(&mut self, id: crate::backend::BufId) -> Result<()> {
        self.0.release(id)
    }
    fn write(&mut self, writes: &[crate::backend::HostWrite<'_>]) -> Result<()> {
        self.0.write(writes)
    }
    fn read(&mut self, reads: &mut [crate::backend::HostRead<'_>]) -> Result<()> {
        self.0.read(reads)
    }
    fn launch(&mut self, call: &crate::backend::Call) -> Result<()> {
        self.0.launch(call)
    }
    fn synchronize(&mut self) -> Result<()> {
        self.0.synchronize()
    }
    fn abort_handle(&self) -> crate::sync::AbortHandle {
        self.0.abort_handle()
    }
    fn memory(&self) -> Result<Vec<Option<crate::backend::DeviceMemory>>> {
        self.0.memory()
    }
    fn ping(&mut self) -> Result<()> {
        self.0.ping()
    }
    fn ordered(&mut self) -> Result<&mut dyn StreamOrdered> {
        Err(crate::backend::ordered::refused_with_one_rank_per_process(
            "cpu",
        ))
    }
}

/// A backend that has stream-ordered calls but not where it runs says
/// why through the engine, typed, and the engine stays usable.
#[test]
fn a_refused_ordered_call_says_why_and_leaves_the_engine_usable() {
    let cfg = EngineConfig::cpu(2);
    let cpu = crate::backend::cpu::CpuBackend::new(2, cfg.timeout, cfg.faults.clone()).unwrap();
    let mut core = Engine::with_backend(Box::new(OneRankPerProcess(cpu)), &cfg, None, None);
    let shape = Shape {
        collective: Collective::AllReduce,
        ranks: 2,
        count: 8,
        elem_size: 4,
        in_place: true,
    };
    let bind = Arc::new(vec![Binding::DEFAULT; 2]);
    let e = core
        .launch_after(
            None,
            shape,
            DataType::Float,
            ReduceOp::Sum,
            bind,
            &After::Work,
            None,
        )
        .unwrap_err();
    match &e {
        Error::Refused { what, over, .. } => {
            assert_eq!(*what, "stream-ordered calls");
            assert_eq!(*over, "with one rank per process");
        }
        other => panic!("expected Error::Refused, got {other:?}"),
    }
    assert!(e.to_string().contains("other processes"), "{e}");
    assert!(matches!(core.work_mark(), Err(Error::Refused { .. })));
    assert!(matches!(core.work_gate(), Err(Error::Refused { .. })));
    // Refused before anything was issued: plain calls still run.
    let mut e = core;
    let mut out = vec![vec![0.0f32; 8]; 2];
    let c = crate::engine::HostCall::new(Collective::AllReduce, false, ReduceOp::Sum);
    let (a, b) = (vec![1.0f32; 8], vec![2.0; 8]);
    let mut outs: Vec<&mut [f32]> = out.iter_mut().map(|o| &mut o[..]).collect();
    e.host(c, &[&a, &b], &mut outs).unwrap();
    assert_eq!(out, vec![vec![3.0; 8]; 2]);
}

#[test]
fn typed_ordered_all_reduce_on_device_buffers() {
    let mut e = Engine::new(EngineConfig::cpu(3)).unwrap();
    let send = e.alloc(10).unwrap();
    let recv = e.alloc(10).unwrap();
    for r in 0..3 {
        e.write_buffer(&send, r, &[r as f32; 10]).unwrap();
    }
    let (shape, bind) = e
        .device_call(Collective::AllReduce, &send, &recv, 10)
        .unwrap();
    e.prepare(None, shape).unwrap();
    let (_, done) = e
        .launch_after(
            None,
            shape,
            DataType::Float,
            ReduceOp::Sum,
            bind,
            &After::Nothing,
            None,
        )
        .unwrap();
    assert_eq!(done.len(), 3);
    for r in 0..3 {
        assert_eq!(e.read_buffer(&recv, r).unwrap(), vec![3.0; 10]);
        assert_eq!(e.read_buffer(&send, r).unwrap(), vec![r as f32; 10]);
    }
}
