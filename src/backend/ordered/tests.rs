use super::*;
use crate::backend::{Binding, NcclCall};
use crate::element::{DataType, ReduceOp};
use crate::engine::Engine;
use crate::EngineConfig;

/// A host kernel that writes its rank's index and a scalar argument
/// into the buffer argument.
fn stamp(h: &mut dyn HostArgs) -> Result<()> {
    let v = [h.rank() as u32, h.int(1) as u32];
    h.write(0, bytemuck::cast_slice(&v))
}

/// The CPU backend runs a kernel's host implementation on every rank,
/// after the argument checks, and refuses a kernel without one.
#[test]
fn cpu_work_runs_the_host_implementation() {
    let ranks = 3;
    let mut core = Engine::new(EngineConfig::cpu(ranks)).unwrap();
    let out = core.alloc_id(&vec![8; ranks]).unwrap();
    let launch = |kernel: WorkKernel, bytes: usize| WorkLaunch {
        kernel: Arc::new(kernel),
        grid: Grid::Blocks(1),
        block: 1,
        args: vec![
            WorkArg::Buf {
                id: out,
                offset: 0,
                bytes,
            },
            WorkArg::U32(7),
        ],
        tag: None,
    };
    const PARAMS: &[Param] = &[Param::Ptr, Param::U32];
    let plain = WorkKernel {
        #[cfg(feature = "cuda")]
        module: crate::work::compute_module(),
        entry: "stamp",
        params: PARAMS,
        check: None,
        builtin: None,
        host: None,
    };
    let e = core.work_launch(&launch(plain.clone(), 8)).unwrap_err();
    assert!(matches!(e, Error::Unsupported(..)), "{e}");
    core.work_launch(&launch(plain.with_host(stamp), 8))
        .unwrap();
    for r in 0..ranks {
        let mut got = [0u32; 2];
        core.read(r, out, 0, bytemuck::cast_slice_mut(&mut got))
            .unwrap();
        assert_eq!(got, [r as u32, 7]);
    }
    let fma = WorkKernel::builtin(Builtin::GradFma).with_host(stamp);
    let e = core.work_launch(&launch(fma, 8)).unwrap_err();
    assert!(matches!(e, Error::BadArgument(..)), "{e}");
}

#[test]
fn cpu_refuses_what_it_cannot_order() {
    let mut core = Engine::new(EngineConfig::cpu(2)).unwrap();
    let e = core.work_wait(&[Completion::complete(0)]).unwrap_err();
    assert!(matches!(e, Error::WrongBufferCount { .. }), "{e}");
    {
        let call = NcclCall {
            collective: crate::plan::Collective::AllReduce,
            count: 4,
            dtype: DataType::Float,
            op: ReduceOp::Sum,
            in_place: true,
            bind: Arc::new(vec![Binding::DEFAULT; 2]),
            buffers: crate::backend::NcclBuffers::Plain,
        };
        let e = core
            .launch_nccl_after(&call, &After::Work, None)
            .unwrap_err();
        assert!(matches!(e, Error::Unsupported(..)), "{e}");
    }
}
