use super::{placement, process_device};
use crate::algo::cost::ring_link_load;

/// Without the `cuda` feature, `cuda` is refused with the reason and
/// `auto` runs on the CPU, saying why.
#[cfg(not(feature = "cuda"))]
#[test]
fn without_the_cuda_feature_auto_is_the_cpu_and_cuda_is_refused() {
    use super::BackendChoice;
    use crate::{Engine, EngineConfig, Error};
    assert_eq!(
        BackendChoice::Auto.cpu_reason().as_deref(),
        Some(super::NO_CUDA)
    );
    let e = Engine::new(EngineConfig::cuda(2)).unwrap_err();
    assert!(matches!(&e, Error::NoCuda(_)), "{e}");
    assert_eq!(
        e.to_string(),
        "the CUDA backend is unavailable: built without the cuda feature"
    );
    let mut e = Engine::new(EngineConfig::new(2, BackendChoice::Auto)).unwrap();
    assert_eq!(e.backend_kind(), super::BackendKind::Cpu);
    let note = e.fallback_note().unwrap_or_default();
    assert!(note.contains("built without the cuda feature"), "{note}");
    let inputs = vec![vec![1.0f32; 5], vec![2.0; 5]];
    let shape = e
        .load(crate::Collective::AllReduce, &inputs, false)
        .unwrap();
    e.run(None, &shape, crate::ReduceOp::Sum).unwrap();
    assert_eq!(e.read_output(&shape).unwrap()[1], vec![3.0; 5]);
}

#[test]
fn a_wait_inside_a_kernel_names_the_step_it_waits_for() {
    use crate::plan::{OpKind, Shape};
    let plan = crate::algo::ringll::plan(&Shape::all_reduce(3, 12, 4, false), 0, true);
    let (i, k) = plan.ops[2]
        .iter()
        .enumerate()
        .find_map(|(i, o)| match &o.kind {
            OpKind::Kernel(k) => Some((i, k)),
            _ => None,
        })
        .unwrap();
    // Rank 2's first receive waits for rank 1's first put.
    let w = k.steps[1].waits[0];
    assert_eq!(
        super::signal_desc(&plan, w),
        "rank 1's ring:ll reduce-scatter step 0 chunk 1 slice 0 (copy), in its ll ring kernel"
    );
    // The receive itself, as an error names the step it failed in:
    // part 0 is the first put (with the kernel's waits on Begin), part
    // 1 that receive.
    assert_eq!(
        super::part_desc(&plan, 2, i, 1),
        "ring:ll reduce-scatter step 0 chunk 1 slice 0 (reduce), in its ll ring kernel"
    );
    assert_eq!(
        super::part_desc(&plan, 2, i, 0),
        "ring:ll reduce-scatter step 0 chunk 2 slice 0 (copy), in its ll ring kernel"
    );
}

#[test]
fn placement_gives_each_rank_its_own_device_when_there_are_enough() {
    assert_eq!(placement(2, &[0, 1]), vec![0, 1]);
    assert_eq!(placement(2, &[3, 1, 2]), vec![3, 1]);
    assert_eq!(placement(3, &[0, 1, 0]), vec![0, 1, 0]);
    assert_eq!(placement(0, &[0, 1]), Vec::<usize>::new());
    assert_eq!(placement(3, &[]), vec![0, 0, 0]);
}

#[test]
fn placement_puts_extra_ranks_in_blocks_so_the_ring_crosses_once_each_way() {
    assert_eq!(placement(4, &[0, 1]), vec![0, 0, 1, 1]);
    assert_eq!(placement(8, &[0, 1]), vec![0, 0, 0, 0, 1, 1, 1, 1]);
    assert_eq!(placement(3, &[0, 1]), vec![0, 0, 1]);
    assert_eq!(placement(5, &[1, 0]), vec![1, 1, 1, 0, 0]);
    assert_eq!(placement(6, &[0, 1, 2]), vec![0, 0, 1, 1, 2, 2]);
    for ranks in 2..=16 {
        for len in 1..=4 {
            let devs: Vec<usize> = (0..len).collect();
            let map = placement(ranks, &devs);
            // Every device listed is used when there are enough ranks.
            for d in &devs[..len.min(ranks)] {
                assert!(map.contains(d), "{ranks} ranks {len} devices: {map:?}");
            }
            // Blocks never cross a link more than once each way.
            assert!(ring_link_load(&map) <= 1, "{ranks} on {len}: {map:?}");
        }
    }
}

#[test]
fn processes_sit_as_rank_threads_do_when_the_local_size_is_known() {
    for n in 1..=9 {
        for devs in [vec![0], vec![0, 1], vec![1, 0], vec![0, 1, 2, 3]] {
            let map = placement(n, &devs);
            for (r, d) in map.iter().enumerate() {
                assert_eq!(process_device(r, Some(n), &devs), *d, "{n} {devs:?} {r}");
            }
        }
    }
    // Unknown or inconsistent local size: local_rank % GPUs.
    assert_eq!(process_device(2, None, &[0, 1]), 0);
    assert_eq!(process_device(3, None, &[0, 1]), 1);
    assert_eq!(process_device(5, Some(4), &[0, 1]), 1);
    // The launcher's one device per rank.
    assert_eq!(process_device(3, Some(4), &[1]), 1);
    assert_eq!(process_device(0, Some(2), &[]), 0);
    // Any local size, however large, is placed without a map of it.
    assert_eq!(process_device(5, Some(usize::MAX), &[0, 1]), 0);
    assert_eq!(process_device(usize::MAX - 1, Some(usize::MAX), &[0, 1]), 1);
}
