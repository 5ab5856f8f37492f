use super::*;

fn mpi(peer: Option<usize>) -> Error {
    Error::Mpi {
        rank: 1,
        peer,
        call: "MPI_Isend",
        message: "MPI_ERR_INTERN: internal error".into(),
    }
}

/// A survivor whose send to a killed rank fails names the killed rank
/// as the job's failure, never itself.
#[test]
fn over_nodes_an_mpi_error_with_a_peer_names_the_peer() {
    let e = link_failed(mpi(Some(3)), &|| "rank 1's copy to rank 3".into());
    assert_eq!(e.rank(), Some(3), "{e}");
    assert!(matches!(e, Error::PeerFailed { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.starts_with(
            "rank 3 failed: MPI could not reach it from rank 1 (MPI_Isend: MPI_ERR_INTERN"
        ),
        "{text}"
    );
    assert!(text.contains("rank 1 at rank 1's copy to rank 3"), "{text}");
    // What names no peer (a collective, a size refused before the
    // call) stays this rank's own error.
    let e = link_failed(mpi(None), &String::new);
    assert!(matches!(e, Error::Mpi { rank: 1, .. }), "{e:?}");
}

/// Each call over nodes begins with the check that no rank reads another
/// node's memory: a plan that passed is not walked again (the walk was
/// 4 % of a rank's time at 4 KiB), one that reads a peer on another node
/// is refused at every call, in place as well as out of place (in place,
/// `oneshot:fused` used to pass the check and fail the job at its first
/// read); reads inside a node pass (`hier:2:mpi` reads its node peer's
/// input).
#[test]
fn over_nodes_a_plan_passes_the_push_check_once_and_fails_it_every_time() {
    let plan = |algo: &str, in_place: bool| {
        let choice: crate::algo::AlgoChoice = algo.parse().expect("a path");
        let shape = crate::plan::Shape::all_reduce(4, 1024, 4, in_place);
        Arc::new(crate::algo::plan_of(&choice, &shape).expect("a plan"))
    };
    let nodes = [0, 0, 1, 1];
    let pass = [
        plan("ring", false),
        plan("hier:2:mpi", false),
        plan("hier:2:mpi", true),
    ];
    let fail = [plan("oneshot:fused", false), plan("oneshot:fused", true)];
    let mut c = PushCheck::default();
    for _ in 0..3 {
        for p in &pass {
            c.check(p, "cpu", &nodes)
                .unwrap_or_else(|e| panic!("{} reads inside its node only: {e}", p.name));
        }
        for p in &fail {
            let e = c
                .check(p, "cpu", &nodes)
                .expect_err("oneshot:fused reads its peers on the other node");
            let text = e.to_string();
            assert!(
                text.contains("can only push") && text.contains("on another node"),
                "{text}"
            );
        }
    }
    assert_eq!(c.passed.len(), pass.len());
    // On one node the same plans pass.
    for p in &fail {
        only_pushes(p, "cpu", &[0; 4]).expect("one node: reads are shared memory");
    }
}
