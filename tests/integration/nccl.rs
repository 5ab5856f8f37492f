//! NCCL side by side: a clear error when it is missing, and on the GPU machine
//! the ring's outputs equal NCCL's.

use crate::common::{cuda_skip_reason, gpu_count, pass};
use crate::ensure;
use crate::harness::{Harness, Outcome};
use ringreduce::bench::{self, Contender};
use ringreduce::cuda::nccl::{Nccl, NcclError};
use ringreduce::verify::{self, Inputs};
use ringreduce::{AlgoChoice, BackendChoice, Engine, EngineConfig, ReduceOp};

pub fn register(h: &mut Harness) {
    h.add("nccl::explicit_missing_path_is_an_error", || {
        let r = Nccl::load(Some(std::path::Path::new("/nonexistent/libnccl.so.2")));
        ensure!(
            matches!(
                r,
                Err(NcclError::Load { .. }) | Err(NcclError::NotFound { .. })
            ),
            "expected a load error"
        );
        let msg = r.err().map(|e| e.to_string()).unwrap_or_default();
        ensure!(
            msg.contains("/nonexistent/libnccl.so.2"),
            "message must name the path: {msg}"
        );
        pass()
    });
    h.add("nccl::ring_equals_nccl_2_ranks", || {
        if let Some(why) = cuda_skip_reason(2) {
            return Ok(Outcome::Skip(why));
        }
        let lib = match Nccl::load(None) {
            Ok(l) => l,
            Err(e) => return Ok(Outcome::Skip(format!("NCCL not found: {e}"))),
        };
        let mut e = Engine::<f32>::new(EngineConfig::new(2, BackendChoice::Cuda)).map_err(|x| x.to_string())?;
        e.backend_mut().nccl_init(&lib).map_err(|x| x.to_string())?;
        for count in [1usize, 3, 1024, 1_000_003, 16 << 20] {
            let inputs = verify::make_inputs::<f32>(Inputs::Random, ReduceOp::Sum, 2, count, 9);
            let r = verify::reference(&inputs, ReduceOp::Sum, Inputs::Random);
            for in_place in [false, true] {
                let (nw, n_out) = bench::checked_call(&mut e, &Contender::Nccl, count, in_place, &inputs, &r).map_err(|x| x.to_string())?;
                for choice in [AlgoChoice::Auto, "ring".parse().map_err(|x: String| x)?, "ring:pipe4".parse().map_err(|x: String| x)?, "oneshot".parse().map_err(|x: String| x)?] {
                    let c = Contender::Engine { name: "ring".into(), choice };
                    let (rw, r_out) = bench::checked_call(&mut e, &c, count, in_place, &inputs, &r).map_err(|x| x.to_string())?;
                    let v = verify::compare(&r_out, &n_out, &r);
                    ensure!(nw == 0 && rw == 0 && v.passed(), "count={count} in_place={in_place} {choice:?}: nccl wrong {nw}, ring wrong {rw}, ring!=nccl {:?}", v.wrong);
                }
            }
        }
        let _ = gpu_count();
        pass()
    });
}
