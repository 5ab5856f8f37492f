//! Errors from the library API: typed, naming what is wrong, never a panic
//! or a hang.

use crate::common::{algo, cuda_skip_reason, pass, skip, Ctx};
use crate::ensure;
use crate::harness::Harness;
use ringreduce::engine::MAX_RANKS;
use ringreduce::{
    AlgoChoice, BackendChoice, Collective, Communicator, Engine, EngineConfig, Error, ReduceOp,
};

pub fn register(h: &mut Harness) {
    h.add("api::rank_count_limits", || {
        let e = Engine::new(EngineConfig::cpu(0));
        ensure!(matches!(e, Err(Error::ZeroRanks)), "0 ranks: {:?}", e.err());
        let e = Engine::new(EngineConfig::cpu(MAX_RANKS + 1));
        ensure!(
            matches!(e, Err(Error::TooManyRanks { ranks, max }) if ranks == MAX_RANKS + 1 && max == MAX_RANKS),
            "{} ranks: {:?}",
            MAX_RANKS + 1,
            e.err()
        );
        let e = Engine::new(EngineConfig::cuda(0));
        ensure!(matches!(e, Err(Error::ZeroRanks)), "0 CUDA ranks: {:?}", e.err());
        pass()
    });

    h.add("api::buffer_counts_and_lengths", || {
        let mut e = Communicator::new(EngineConfig::cpu(3)).ctx("communicator")?;
        // One buffer per rank.
        let mut two = vec![vec![0.0f32; 10]; 2];
        let r = e.all_reduce_in_place(&mut two, ReduceOp::Sum);
        ensure!(
            matches!(
                r,
                Err(Error::WrongBufferCount {
                    ranks: 3,
                    buffers: 2
                })
            ),
            "2 buffers on 3 ranks: {r:?}"
        );
        let mut engine = Engine::new(EngineConfig::cpu(3)).ctx("engine")?;
        let r = engine.load(Collective::AllReduce, &vec![vec![0.0f32; 4]; 4], false);
        ensure!(
            matches!(
                r,
                Err(Error::WrongBufferCount {
                    ranks: 3,
                    buffers: 4
                })
            ),
            "load of 4 buffers: {r:?}"
        );
        // Equal lengths, naming the rank that differs.
        let mut bufs = vec![vec![0.0f32; 10], vec![0.0; 10], vec![0.0; 9]];
        let r = e.all_reduce_in_place(&mut bufs, ReduceOp::Sum);
        ensure!(
            matches!(
                r,
                Err(Error::BufferSize {
                    rank: 2,
                    expected: 10,
                    found: 9,
                    ..
                }) | Err(Error::LengthMismatch {
                    rank: 2,
                    expected: 10,
                    found: 9
                })
            ),
            "unequal lengths: {r:?}"
        );
        ensure!(
            r.is_err_and(|x| x.rank() == Some(2)),
            "the error must name rank 2"
        );
        // recv must match send.
        let send = vec![vec![1.0f32; 8]; 3];
        let mut recv = vec![vec![0.0f32; 8], vec![0.0; 7], vec![0.0; 8]];
        let r = e.all_reduce(&send, &mut recv, ReduceOp::Sum);
        ensure!(
            matches!(
                r,
                Err(Error::BufferSize {
                    rank: 1,
                    expected: 8,
                    found: 7,
                    ..
                })
            ),
            "short recv: {r:?}"
        );
        ensure!(
            recv[0].iter().all(|&x| x == 0.0),
            "a refused call wrote an output"
        );
        // Reduce-scatter: the input splits into equal chunks; the output is one chunk.
        let rs = vec![vec![1.0f32; 10]; 3];
        let mut out = vec![vec![0.0f32; 3]; 3];
        let r = e.reduce_scatter(&rs, &mut out, ReduceOp::Sum);
        ensure!(
            matches!(
                r,
                Err(Error::BufferSize {
                    rank: 0,
                    what: "input",
                    expected: 9,
                    found: 10
                })
            ),
            "reduce-scatter of 10 into 3 on 3 ranks (the same error as a rank's handle gets): {r:?}"
        );
        let rs = vec![vec![1.0f32; 9]; 3];
        let mut out = vec![vec![0.0f32; 4]; 3];
        let r = e.reduce_scatter(&rs, &mut out, ReduceOp::Sum);
        // NCCL's count of a reduce-scatter is its output's: 4 elements out
        // need 12 in.
        ensure!(
            matches!(
                r,
                Err(Error::BufferSize {
                    what: "input",
                    expected: 12,
                    found: 9,
                    ..
                })
            ),
            "reduce-scatter output of 4: {r:?}"
        );
        // All-gather: the output is ranks x input.
        let mut out = vec![vec![0.0f32; 8]; 3];
        let r = e.all_gather(&vec![vec![1.0f32; 3]; 3], &mut out);
        ensure!(
            matches!(
                r,
                Err(Error::BufferSize {
                    expected: 9,
                    found: 8,
                    ..
                })
            ),
            "all-gather output of 8: {r:?}"
        );
        let mut bufs = vec![vec![1.0f32; 10]; 3];
        let r = e.all_gather_in_place(&mut bufs);
        ensure!(
            matches!(r, Err(Error::BadArgument(_))),
            "in-place all-gather of 10 on 3 ranks: {r:?}"
        );
        // A call of the right shape still works.
        let mut ok = vec![vec![1.0f32; 5]; 3];
        e.all_reduce_in_place(&mut ok, ReduceOp::Sum)
            .ctx("after the errors")?;
        ensure!(
            ok.iter().all(|v| v.iter().all(|&x| x == 3.0)),
            "wrong after the errors"
        );
        pass()
    });

    h.add("api::a_path_refuses_a_shape_with_the_reason", || {
        // oneshot:flag is an exchange of two ranks.
        let mut cfg = EngineConfig::cpu(3);
        cfg.algo = algo("oneshot:flag");
        let mut e3 = Communicator::new(cfg).ctx("communicator of 3")?;
        let mut bufs = vec![vec![1.0f32; 16]; 3];
        let r = e3.all_reduce_in_place(&mut bufs, ReduceOp::Sum);
        match r {
            Err(Error::BadArgument(m)) => ensure!(
                m.contains("oneshot:flag") && m.contains("two-rank") && m.contains("cannot run"),
                "the refusal must name the path and the reason: {m}"
            ),
            other => return Err(format!("oneshot:flag on 3 ranks: {other:?}")),
        }
        ensure!(
            bufs.iter().all(|v| v.iter().all(|&x| x == 1.0)),
            "a refused call changed the buffers"
        );
        let mut cfg = EngineConfig::cpu(2);
        cfg.algo = algo("oneshot:fused");
        let mut e = Communicator::new(cfg).ctx("communicator")?;
        // In place too: it sums into scratch.
        let mut bufs = vec![vec![1.0f32; 16]; 2];
        e.all_reduce_in_place(&mut bufs, ReduceOp::Sum)
            .ctx("in place")?;
        ensure!(
            bufs.iter().all(|v| v.iter().all(|&x| x == 2.0)),
            "oneshot:fused in place wrong"
        );
        let send = vec![vec![1.0f32; 16]; 2];
        let mut recv = vec![vec![0.0f32; 16]; 2];
        e.all_reduce(&send, &mut recv, ReduceOp::Sum)
            .ctx("out of place")?;
        ensure!(
            recv.iter().all(|v| v.iter().all(|&x| x == 2.0)),
            "oneshot:fused out of place wrong"
        );
        // All-reduce-only paths refuse the other collectives, naming both
        // (oneshot:fused runs every collective).
        for path in ["oneshot", "oneshot:flag", "ps"] {
            for c in [Collective::ReduceScatter, Collective::AllGather] {
                let shape = ringreduce::plan::Shape {
                    collective: c,
                    ..ringreduce::plan::Shape::all_reduce(2, 8, 4, false)
                };
                match algo(path).resolve(&shape) {
                    Err(Error::BadArgument(m)) => ensure!(
                        m.contains(path) && m.contains("all-reduce only") && m.contains(c.name()),
                        "{path} {c}: {m}"
                    ),
                    other => return Err(format!("{path} {c}: {other:?}")),
                }
            }
        }
        // oneshot:flag is a two-rank exchange.
        let shape = ringreduce::plan::Shape::all_reduce(3, 8, 4, false);
        match algo("oneshot:flag").resolve(&shape) {
            Err(Error::BadArgument(m)) => {
                ensure!(m.contains("oneshot:flag") && m.contains("two-rank"), "{m}")
            }
            other => return Err(format!("oneshot:flag on 3 ranks: {other:?}")),
        }
        // Names: unknown ones list the known ones; pipeK is bounded.
        for bad in ["tree", "ring:pipe0", "ring:pipe65", "ring:pipex", ""] {
            let r: Result<AlgoChoice, String> = bad.parse();
            ensure!(r.is_err(), "{bad:?} parsed");
        }
        let r: Result<AlgoChoice, String> = "tree".parse();
        ensure!(
            r.is_err_and(|m| m.contains("tree")
                && m.contains("ring")
                && m.contains("oneshot:flag")
                && m.contains("ps")),
            "unknown name"
        );
        for good in [
            "auto",
            "AUTO",
            "ring",
            "ring:naive",
            "ring:pipe1",
            "ring:pipe64",
            "oneshot",
            "oneshot:fused",
            "oneshot:flag",
            "ps",
        ] {
            let r: Result<AlgoChoice, String> = good.parse();
            ensure!(r.is_ok(), "{good:?}: {r:?}");
        }
        pass()
    });

    h.add("api::counts_whose_bytes_overflow", || {
        let mut e = Engine::new(EngineConfig::cpu(2)).ctx("engine")?;
        for (c, count) in [
            (Collective::AllReduce, usize::MAX / 2),
            (Collective::AllReduce, usize::MAX),
            (Collective::ReduceScatter, usize::MAX / 3),
            (Collective::AllGather, 1usize << 62),
        ] {
            let shape = e.shape::<f32>(c, count, false);
            let r = e.launch(None, &shape, ReduceOp::Sum);
            ensure!(
                matches!(r, Err(Error::TooLarge { .. })),
                "{c} of {count}: {:?}",
                r.err()
            );
        }
        ensure!(
            e.alloc::<f32>(usize::MAX / 2).is_err(),
            "alloc of usize::MAX/2 floats accepted"
        );
        let buf = e.alloc::<f32>(16).ctx("alloc")?;
        let r = e.collective_device(
            Collective::AllGather,
            &buf,
            &buf,
            1usize << 63,
            ReduceOp::Sum,
        );
        ensure!(
            r.is_err(),
            "a device all-gather of 2^63 elements per rank accepted"
        );
        let r = e.all_reduce_device(&buf, &buf, usize::MAX, ReduceOp::Sum);
        ensure!(
            r.is_err(),
            "a device all-reduce of usize::MAX elements accepted"
        );
        // The engine still works.
        let shape = e
            .load(Collective::AllReduce, &vec![vec![1.0f32; 3]; 2], false)
            .ctx("load after the errors")?;
        e.run(None, &shape, ReduceOp::Sum).ctx("after the errors")?;
        ensure!(
            e.read_output(&shape).ctx("read")? == vec![vec![2.0f32; 3]; 2],
            "wrong after the errors"
        );
        pass()
    });

    h.add("api::a_call_for_another_rank_count_is_refused", || {
        let mut e = Engine::new(EngineConfig::cpu(2)).ctx("engine")?;
        let shape = ringreduce::engine::TypedShape::<f32>::new(
            ringreduce::plan::Shape::all_reduce(3, 8, 4, false),
        )
        .ctx("shape")?;
        let r = e.launch(None, &shape, ReduceOp::Sum);
        ensure!(r.is_err(), "a 3-rank call on a 2-rank engine launched");
        pass()
    });

    h.add("api::cuda_without_a_driver_is_no_cuda", || {
        if cuda_skip_reason(1).is_none() {
            return skip("a CUDA driver and a GPU are present on this machine");
        }
        let e = Engine::new(EngineConfig::cuda(2));
        ensure!(
            matches!(e, Err(Error::NoCuda(_))),
            "expected NoCuda, got {:?}",
            e.err()
        );
        let auto = Engine::new(EngineConfig::new(2, BackendChoice::Auto)).ctx("auto")?;
        ensure!(
            &auto.fallback_note().is_some_and(|n| n.contains("cpu")),
            "auto must fall back to the CPU and say so"
        );
        pass()
    });
}
