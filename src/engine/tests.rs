use super::*;
use crate::plan::Collective;

/// One engine runs calls of several element types on its own buffers,
/// each typed by the shape its `load` returned; a shape whose element
/// size is not the type's is refused by name.
#[test]
fn a_shape_carries_its_element_type() {
    let mut e = Engine::new(EngineConfig::cpu(2)).unwrap();
    let f = e
        .load(
            Collective::AllReduce,
            &[vec![1.5f32; 3], vec![2.0; 3]],
            false,
        )
        .unwrap();
    e.run(None, &f, ReduceOp::Sum).unwrap();
    assert_eq!(e.read_output(&f).unwrap(), vec![vec![3.5f32; 3]; 2]);
    let i = e
        .load(Collective::AllReduce, &[vec![7i64; 5], vec![-2; 5]], true)
        .unwrap();
    e.run(None, &i, ReduceOp::Max).unwrap();
    assert_eq!(e.read_output(&i).unwrap(), vec![vec![7i64; 5]; 2]);
    let wide = Shape::all_reduce(2, 4, 8, false);
    let err = TypedShape::<f32>::new(wide).unwrap_err().to_string();
    assert!(err.contains("8-byte") && err.contains("float"), "{err}");
    assert_eq!(TypedShape::<f64>::new(wide).unwrap().shape(), wide);
}

/// Processes that share a GPU, and only they, take turns on it: threads
/// of one process share a context, ranks on distinct GPUs do not
/// compete, host memory has no GPU, and over nodes the ordinals of two
/// nodes are not the same GPU.
#[test]
fn only_processes_sharing_a_gpu_are_time_sliced() {
    use crate::backend::BackendKind::{Cpu, Cuda};
    let sliced = |kind, processes, per_node, devices: &[usize]| {
        placement(kind, processes, per_node, devices, 8).time_sliced
    };
    assert!(sliced(Cuda, true, None, &[0, 0]));
    assert!(sliced(Cuda, true, None, &[0, 1, 1, 2]));
    assert!(sliced(Cuda, true, None, &[3, 1, 2, 3]));
    assert!(!sliced(Cuda, true, None, &[0, 1]));
    assert!(!sliced(Cuda, true, None, &[0]));
    assert!(!sliced(Cuda, false, None, &[0, 0, 0]));
    assert!(!sliced(Cpu, true, None, &[0, 0]));
    assert!(!sliced(Cuda, true, Some(2), &[0, 1, 0, 1]));
    let p = placement(Cpu, true, Some(2), &[0, 0], 8);
    assert_eq!((p.per_node, p.host), (Some(2), true));
}

/// One GPU for every rank, the ranks threads of this process: what
/// lets `auto` take `ring:ll` (its kernels run at once there).
#[test]
fn one_gpu_is_threads_on_a_single_gpu() {
    use crate::backend::BackendKind::{Cpu, Cuda};
    let one = |kind, processes, per_node, devices: &[usize]| {
        placement(kind, processes, per_node, devices, 8).one_gpu
    };
    assert!(one(Cuda, false, None, &[0, 0]));
    assert!(one(Cuda, false, None, &[2, 2, 2, 2]));
    assert!(!one(Cuda, false, None, &[0, 1]));
    assert!(!one(Cuda, false, None, &[0]));
    assert!(!one(Cuda, true, None, &[0, 0]));
    assert!(!one(Cpu, false, None, &[0, 0]));
    assert!(!one(Cuda, false, Some(2), &[0, 0, 0, 0]));
}

/// Rank threads sharing a GPU need `QUEUES_PER_RANK` hardware queues
/// each for kernels that spin on each other (4 rank threads on one GPU
/// with the driver's 8 stopped; `results/2026-12-06-h100x1-ll-stop/`);
/// the most threads on any one GPU count, processes and host memory
/// never.
#[test]
fn rank_threads_sharing_a_gpu_need_its_queues_for_spinning_kernels() {
    use crate::algo::ShortQueues;
    use crate::backend::BackendKind::{Cpu, Cuda};
    let short = |kind, processes, devices: &[usize], queues| {
        placement(kind, processes, None, devices, queues).short_queues
    };
    assert_eq!(short(Cuda, false, &[0, 0], 8), None);
    assert_eq!(
        short(Cuda, false, &[0, 0, 0, 0], 8),
        Some(ShortQueues {
            ranks: 4,
            queues: 8
        })
    );
    assert_eq!(short(Cuda, false, &[0, 0, 0, 0], 16), None);
    assert_eq!(
        short(Cuda, false, &[0, 0, 1, 1, 1], 8),
        Some(ShortQueues {
            ranks: 3,
            queues: 8
        })
    );
    assert_eq!(short(Cuda, false, &[0, 1, 2, 3], 1), None);
    assert_eq!(
        short(Cuda, false, &[0, 0], 1),
        Some(ShortQueues {
            ranks: 2,
            queues: 1
        })
    );
    assert_eq!(short(Cuda, true, &[0, 0, 0, 0], 8), None);
    assert_eq!(short(Cpu, false, &[0, 0, 0, 0], 8), None);
}

/// Regression: the resolved-path cache was keyed by the address of the
/// caller's algorithm; a choice dropped and a new one allocated at the
/// same address reused the old path (a refused `oneshot:flag` call on 3
/// ranks ran as `ps`).
#[test]
fn fresh_choices_never_reuse_another_algorithms_path() {
    let mut e = Engine::new(EngineConfig::new(3, BackendChoice::Cpu)).expect("cpu engine");
    let shape = Shape {
        collective: Collective::AllReduce,
        ranks: 3,
        count: 8,
        elem_size: 4,
        in_place: false,
    };
    for _ in 0..200 {
        let ps: AlgoChoice = "ps".parse().expect("ps");
        let k = e.path_of(Some(&ps), &shape).expect("ps runs 3 ranks");
        assert_eq!(e.paths[k].0, "ps");
        drop(ps);
        let flag: AlgoChoice = "oneshot:flag".parse().expect("flag");
        assert!(
            e.path_of(Some(&flag), &shape).is_err(),
            "oneshot:flag must refuse 3 ranks"
        );
    }
}

/// A rank of a job asked for another rank count than the job's is refused
/// before it joins, in every build (the check once sat under the `cuda`
/// feature, so a CPU-only build joined and waited for ranks that would
/// never come).
#[test]
fn a_job_rank_asked_for_another_rank_count_is_refused_before_joining() {
    let store = std::env::temp_dir().join(format!("rr-rank-count-{}", std::process::id()));
    let mut cfg = EngineConfig::job(
        crate::process::JobSpec::new(0, 2, &store),
        BackendChoice::Cpu,
    );
    cfg.ranks = 3;
    cfg.timeout = std::time::Duration::from_secs(2);
    let Err(err) = Engine::new(cfg) else {
        panic!("3 ranks in a job of 2 were not refused");
    };
    let msg = err.to_string();
    assert!(
        matches!(err, Error::BadArgument(_))
            && msg.contains("3 ranks asked for")
            && msg.contains("a job of 2"),
        "{msg}"
    );
    assert!(
        !store.exists(),
        "the store was created: the rank joined first"
    );
}
