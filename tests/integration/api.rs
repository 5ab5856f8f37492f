//! Errors from the library API: typed, never a panic or a hang.

use crate::common::pass;
use crate::ensure;
use crate::harness::{Harness, Outcome};
use ringreduce::{Engine, EngineConfig, Error};

pub fn register(h: &mut Harness) {
    h.add("api::zero_ranks", || {
        let e = Engine::<f32>::new(EngineConfig::cpu(0));
        ensure!(matches!(e, Err(Error::ZeroRanks)), "expected ZeroRanks");
        pass()
    });
    h.add("api::length_mismatch", || {
        let mut e = Engine::<f32>::new(EngineConfig::cpu(3)).map_err(|x| x.to_string())?;
        let mut bufs = vec![vec![0.0f32; 10], vec![0.0; 10], vec![0.0; 9]];
        let r = e.all_reduce_in_place(&mut bufs);
        ensure!(
            matches!(
                r,
                Err(Error::LengthMismatch {
                    rank: 2,
                    expected: 10,
                    found: 9
                })
            ),
            "got {r:?}"
        );
        let mut two = vec![vec![0.0f32; 10]; 2];
        ensure!(
            matches!(
                e.all_reduce_in_place(&mut two),
                Err(Error::WrongBufferCount { .. })
            ),
            "buffer count"
        );
        pass()
    });
    h.add("api::send_recv_mismatch", || {
        let mut e = Engine::<f32>::new(EngineConfig::cpu(2)).map_err(|x| x.to_string())?;
        let send = vec![vec![1.0f32; 8]; 2];
        let mut recv = vec![vec![0.0f32; 8], vec![0.0; 7]];
        let r = e.all_reduce(&send, &mut recv);
        ensure!(
            matches!(
                r,
                Err(Error::SendRecvMismatch {
                    rank: 1,
                    send: 8,
                    recv: 7
                })
            ),
            "got {r:?}"
        );
        pass()
    });
    h.add("api::count_too_large", || {
        let mut e = Engine::<f32>::new(EngineConfig::cpu(2)).map_err(|x| x.to_string())?;
        let r = e.plan(ringreduce::Algo::RING, usize::MAX / 2, false);
        ensure!(
            matches!(r, Err(Error::TooLarge { .. })),
            "got {:?}",
            r.err()
        );
        pass()
    });
    h.add("api::cuda_without_driver_is_an_error", || {
        if crate::common::cuda_skip_reason(1).is_none() {
            return Ok(Outcome::Skip(
                "a CUDA driver is present on this machine".into(),
            ));
        }
        let e = Engine::<f32>::new(EngineConfig::new(2, ringreduce::BackendChoice::Cuda));
        ensure!(
            matches!(e, Err(Error::NoCuda(_))),
            "expected NoCuda, got {:?}",
            e.err()
        );
        let auto = Engine::<f32>::new(EngineConfig::new(2, ringreduce::BackendChoice::Auto))
            .map_err(|x| x.to_string())?;
        ensure!(auto.fallback_note().is_some(), "auto must say it fell back");
        pass()
    });
}
