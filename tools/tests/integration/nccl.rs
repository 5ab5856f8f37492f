//! NCCL side by side: a clear error when it is missing, and on 2+ GPUs
//! ringreduce's outputs equal NCCL's on the same inputs.

use crate::common::{algo, contender, cuda_skip_reason, gpu_count, pass, skip, Ctx};
use crate::ensure;
use crate::harness::{Harness, Outcome, TestResult};
use ringreduce::cuda::nccl::{Nccl, NcclError};
use ringreduce::element::DataType;
use ringreduce::{BackendChoice, Collective, Element, Engine, EngineConfig, ReduceOp};
use ringreduce_tools::bench::{self, Contender, ContenderKind};
use ringreduce_tools::verify::{self, Inputs};
use std::process::Command;

const MISSING: &str = "/nonexistent/libnccl.so.2";

/// Every (collective, op, count, place, path) for one type: ringreduce vs
/// NCCL on the same inputs, element by element.
fn compare_type<T: Element>(e: &mut Engine) -> Result<(), String> {
    let n = e.ranks();
    let nccl = Contender {
        name: "nccl".into(),
        kind: ContenderKind::Nccl(ringreduce::backend::NcclBuffers::Plain),
    };
    for collective in Collective::ALL {
        let ops = if collective.reduces() {
            ReduceOp::ALL.to_vec()
        } else {
            vec![ReduceOp::Sum]
        };
        for op in ops {
            for count in [1usize, 3, 1000, 65_537] {
                for kind in [Inputs::Exact, Inputs::Random] {
                    let per_rank = e.shape::<T>(collective, count, false).input(0).len();
                    let inputs =
                        verify::make_inputs::<T>(kind, op, n, per_rank, 9).expect("inputs");
                    let expect = bench::expected(collective, &inputs, op, kind);
                    for in_place in [false, true] {
                        let what = format!(
                            "{collective} {} {} count {count} {kind} {}",
                            T::DTYPE.name(),
                            op.name(),
                            if in_place { "in place" } else { "out of place" }
                        );
                        let (nw, _, n_out) = bench::checked_call(
                            e, &nccl, collective, in_place, op, &inputs, &expect,
                        )
                        .ctx(format!("{what}: NCCL"))?;
                        ensure!(nw == 0, "{what}: NCCL itself is wrong in {nw} elements");
                        for path in ["auto", "ring", "ring:pipe2", "oneshot", "oneshot:flag"] {
                            let choice = algo(path);
                            if choice
                                .resolve(&e.shape::<T>(collective, count, in_place))
                                .is_err()
                            {
                                continue;
                            }
                            let (rw, _, r_out) = bench::checked_call(
                                e,
                                &contender(&choice),
                                collective,
                                in_place,
                                op,
                                &inputs,
                                &expect,
                            )
                            .ctx(format!("{what}: {path}"))?;
                            let v = bench::compare_outputs(&r_out, &n_out, &expect);
                            ensure!(
                                rw == 0 && v.passed(),
                                "{what} {path}: ringreduce wrong {rw}, ringreduce != NCCL in {:?}, first (rank, index, ringreduce, NCCL) {:?}",
                                v.wrong,
                                v.first_wrong
                            );
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// `nccl:reg` and `nccl:sym`, plain and from graphs, give NCCL's results on
/// buffers from NCCL's allocator; the engine refuses that allocator once it
/// holds a buffer.
fn registered_and_symmetric(lib: &Nccl) -> TestResult {
    let n = gpu_count();
    let mut core = Engine::new(EngineConfig::new(n, BackendChoice::Cuda)).ctx("engine")?;
    core.nccl_memory(lib).ctx("NCCL's memory")?;
    core.nccl_init(lib).ctx("NCCL init")?;
    for name in [
        "nccl",
        "nccl:reg",
        "nccl:sym",
        "nccl:reg:graph",
        "nccl:sym:graph",
    ] {
        let c = Contender::parse(name).ctx("contender")?;
        for collective in Collective::ALL {
            if matches!(collective, Collective::Broadcast { .. }) {
                continue;
            }
            for count in [1000usize, 65_537] {
                let per_rank = core.shape::<f32>(collective, count, false).input(0).len();
                let inputs =
                    verify::make_inputs::<f32>(Inputs::Exact, ReduceOp::Sum, n, per_rank, 5)
                        .expect("inputs");
                let expect = bench::expected(collective, &inputs, ReduceOp::Sum, Inputs::Exact);
                for in_place in [false, true] {
                    let (wrong, _, _) = bench::checked_call(
                        &mut core,
                        &c,
                        collective,
                        in_place,
                        ReduceOp::Sum,
                        &inputs,
                        &expect,
                    )
                    .ctx(format!(
                        "{name} {collective} count {count} in place {in_place}"
                    ))?;
                    ensure!(
                        wrong == 0,
                        "{name} {collective} count {count} in place {in_place}: {wrong} wrong"
                    );
                }
            }
        }
    }
    let e = core.nccl_memory(lib);
    ensure!(
        matches!(e, Err(ringreduce::Error::BadArgument(_))),
        "NCCL's memory after the first buffer: {e:?}"
    );
    pass()
}

pub fn register(h: &mut Harness) {
    h.add("nccl::missing_library_path_is_an_error", || {
        let r = Nccl::load(Some(std::path::Path::new(MISSING)));
        ensure!(
            matches!(
                r,
                Err(NcclError::Load { .. }) | Err(NcclError::NotFound { .. })
            ),
            "expected a load error"
        );
        let msg = r.err().map(|e| e.to_string()).unwrap_or_default();
        ensure!(
            msg.contains(MISSING),
            "the message must name the path: {msg}"
        );
        // The CLI likewise: exit 2, the path named, no panic.
        let bin = std::env::var_os("RINGREDUCE_BIN")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_ringreduce").into());
        for args in [
            vec![
                "check",
                "--backend",
                "cpu",
                "--ranks",
                "2",
                "--sizes",
                "4KiB",
                "--nccl-lib",
                MISSING,
            ],
            vec![
                "bench",
                "--backend",
                "cpu",
                "--ranks",
                "2",
                "--algo",
                "ring,nccl",
                "-b",
                "8",
                "-e",
                "64",
                "--nccl-lib",
                MISSING,
            ],
        ] {
            let out = Command::new(&bin)
                .args(&args)
                .output()
                .ctx("run ringreduce")?;
            let err = String::from_utf8_lossy(&out.stderr);
            ensure!(
                out.status.code() == Some(2) && err.contains(MISSING),
                "{args:?}: exit {:?}: {err}",
                out.status.code()
            );
            ensure!(!err.contains("panicked"), "{args:?} panicked: {err}");
        }
        pass()
    });

    h.add("nccl::ringreduce_equals_nccl[cuda]", || -> TestResult {
        if let Some(why) = cuda_skip_reason(2) {
            return Ok(Outcome::Skip(why));
        }
        let lib = match Nccl::load(None) {
            Ok(l) => l,
            Err(e) => return skip(format!("NCCL not found: {e}")),
        };
        // One rank per GPU, as NCCL requires.
        let n = gpu_count();
        let mut core = Engine::new(EngineConfig::new(n, BackendChoice::Cuda)).ctx("engine")?;
        core.nccl_init(&lib).ctx("NCCL init")?;
        for dtype in [
            DataType::Float,
            DataType::Half,
            DataType::Bfloat16,
            DataType::Double,
            DataType::Int32,
            DataType::Int8,
            DataType::Uint64,
        ] {
            let r = ringreduce::with_element!(dtype, T => compare_type::<T>(&mut core));
            r?;
        }
        pass()
    });

    h.add(
        "nccl::registered_and_symmetric_buffers[cuda]",
        || -> TestResult {
            if let Some(why) = cuda_skip_reason(1) {
                return Ok(Outcome::Skip(why));
            }
            let lib = match Nccl::load(None) {
                Ok(l) => l,
                Err(e) => return skip(format!("NCCL not found: {e}")),
            };
            if lib.version_info() < ringreduce::cuda::nccl::Version::new(2, 27, 0) {
                return skip(format!(
                    "NCCL {} has no symmetric windows (2.27+)",
                    lib.version_info()
                ));
            }
            registered_and_symmetric(&lib)
        },
    );
}
