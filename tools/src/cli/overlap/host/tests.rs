use super::*;
use ringreduce::algo::AlgoChoice;
use ringreduce::backend::ordered::{After, Grid, SpanTag, WorkArg, WorkLaunch};
use ringreduce::backend::Binding;
use ringreduce::element::{DataType, ReduceOp};
use ringreduce::engine::Engine;
use ringreduce::plan::Shape;
use ringreduce::EngineConfig;
use std::sync::Arc;
use std::time::Duration;

#[test]
fn the_value_formula_matches_the_ptx_headers_definition() {
    // Spot values computed by hand from the formula in ptx/compute.ptx.
    let h = |i: u32, b: u32, r: u32, s: u32| {
        let mut h = i
            .wrapping_mul(0x9E3779B1)
            .wrapping_add(b.wrapping_mul(0x85EBCA77))
            .wrapping_add(r.wrapping_mul(0xC2B2AE3D))
            .wrapping_add(s.wrapping_mul(0x27D4EB2F));
        h ^= h >> 15;
        ((h >> 7) & 1023) as i32 - 512
    };
    for (i, b, r, s) in [
        (0, 0, 0, 0),
        (1, 2, 3, 4),
        (1 << 31, 7, 1, 99),
        (12345, 0, 1, 1),
    ] {
        assert_eq!(grad_value(r, b, u64::from(i), s), h(i, b, r, s));
    }
    assert_eq!(grad_value(0, 0, 0, 0), -512);
    let all: Vec<i32> = (0..4096).map(|i| grad_value(1, 2, i, 3)).collect();
    assert!(all.iter().all(|v| (-512..512).contains(v)));
    assert!(all.iter().any(|&v| v < -400) && all.iter().any(|&v| v > 400));
    assert_eq!(
        grad_sum(0, 2, 2, 5, 3),
        (grad_value(0, 2, 5, 3) + grad_value(1, 2, 5, 3)) as f32
    );
}

/// The work stream writes a bucket, an ordered all-reduce sums it, the
/// check kernel counts 0 wrong; a stale bucket (the next step's values
/// expected) counts every element.
#[test]
fn cpu_work_then_ordered_all_reduce_then_check() {
    let ranks = 3;
    let mut core = Engine::new(EngineConfig::cpu(ranks)).unwrap();
    let n = 1000usize;
    let bucket = core.alloc_id(&vec![4 * n; ranks]).unwrap();
    let ctr = core.alloc_id(&vec![16; ranks]).unwrap();
    core.work_mark().unwrap();
    let fma = Arc::new(kernel(Builtin::GradFma));
    core.work_launch(&WorkLaunch {
        kernel: fma,
        grid: Grid::Items(n as u64),
        block: 256,
        args: vec![
            WorkArg::Buf {
                id: bucket,
                offset: 0,
                bytes: 4 * n,
            },
            WorkArg::U64(n as u64),
            WorkArg::U32(1),
            WorkArg::F32(0.999),
            WorkArg::F32(0.001),
            WorkArg::Rank,
            WorkArg::U32(4),
            WorkArg::U32(7),
        ],
        tag: Some(SpanTag {
            what: "kernel",
            index: 4,
        }),
    })
    .unwrap();
    let shape = Shape::all_reduce(ranks, n, 4, true);
    let bind = Arc::new(vec![
        Binding {
            send: bucket,
            recv: bucket
        };
        ranks
    ]);
    let (_plan, done) = core
        .launch_after(
            Some(&AlgoChoice::Auto),
            shape,
            DataType::Float,
            ReduceOp::Sum,
            bind,
            &After::Work,
            Some(SpanTag {
                what: "collective",
                index: 4,
            }),
        )
        .unwrap();
    assert_eq!(done.len(), ranks);
    for (r, d) in done.iter().enumerate() {
        assert_eq!(d.rank(), r);
        assert!(d.is_complete().unwrap());
        d.wait(Duration::from_secs(1)).unwrap();
    }
    core.work_wait(&done).unwrap();
    let check = |core: &mut Engine, step: u32| -> Vec<[u64; 2]> {
        for r in 0..ranks {
            core.write(r, ctr, 0, bytemuck::cast_slice(&[0u64, u64::MAX]))
                .unwrap();
        }
        core.work_launch(&WorkLaunch {
            kernel: Arc::new(kernel(Builtin::GradCheck)),
            grid: Grid::Items(n as u64),
            block: 256,
            args: vec![
                WorkArg::Buf {
                    id: bucket,
                    offset: 0,
                    bytes: 4 * n,
                },
                WorkArg::U64(n as u64),
                WorkArg::Buf {
                    id: ctr,
                    offset: 0,
                    bytes: 16,
                },
                WorkArg::U32(0),
                WorkArg::U32(ranks as u32),
                WorkArg::U32(4),
                WorkArg::U32(step),
            ],
            tag: None,
        })
        .unwrap();
        (0..ranks)
            .map(|r| {
                let mut c = [0u64; 2];
                core.read(r, ctr, 0, bytemuck::cast_slice_mut(&mut c))
                    .unwrap();
                c
            })
            .collect()
    };
    assert!(check(&mut core, 7).iter().all(|c| *c == [0, u64::MAX]));
    assert!(check(&mut core, 8).iter().all(|c| c[0] > 900 && c[1] < 5));
    let spans = core.take_work_spans().unwrap();
    let k = spans
        .iter()
        .find(|s| s.what == "kernel" && s.rank == 1)
        .unwrap();
    let c = spans
        .iter()
        .find(|s| s.what == "collective" && s.rank == 1)
        .unwrap();
    assert!(k.end_ns <= c.start_ns && k.stream == "work" && c.stream == "comm");
}
