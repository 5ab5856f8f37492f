use super::*;

#[test]
fn sizes() {
    assert_eq!(sweep_sizes(8, 64, 2.0).unwrap(), vec![8, 16, 32, 64]);
    assert!(sweep_sizes(8, 4, 2.0).is_err());
    assert!(sweep_sizes(8, 64, 1.0).is_err());
    assert!(sweep_sizes(0, 64, 2.0).is_err(), "0 never grows");
    assert!(sweep_sizes(1, 1 << 40, 1.0001).is_err(), "too many sizes");
}

/// A size gives a row when it holds one element per rank: all-reduce
/// counts elements of the whole buffer, reduce-scatter and all-gather
/// of each rank's share (the issue-25 sweeps that printed no table).
#[test]
fn sizes_below_one_element_per_rank_are_reported() {
    let one = [1u64];
    let s = skipped_sizes(Collective::AllReduce, 4, 2, &one).unwrap();
    assert!(s.all(&one));
    assert_eq!(s.smallest, 4);
    let sweep = sweep_sizes(3, 13, 3.0).unwrap();
    assert_eq!(sweep, vec![3, 9]);
    for (coll, elem, ranks, skipped) in [
        (Collective::AllReduce, 1, 3, vec![]),
        (Collective::AllReduce, 4, 3, vec![3]),
        (Collective::AllReduce, 8, 3, vec![3]),
        (Collective::ReduceScatter, 1, 3, vec![]),
        (Collective::ReduceScatter, 2, 3, vec![3]),
        (Collective::ReduceScatter, 4, 3, vec![3, 9]),
        (Collective::AllGather, 8, 3, vec![3, 9]),
    ] {
        let got = skipped_sizes(coll, elem, ranks, &sweep);
        assert_eq!(
            got.map(|s| s.sizes).unwrap_or_default(),
            skipped,
            "{coll} {elem}-byte elements on {ranks} ranks"
        );
        for &b in &sweep {
            let empty = count_for(coll, b, elem, ranks) == 0;
            assert_eq!(empty, skipped.contains(&b));
        }
    }
}

#[test]
fn contenders() {
    let v = parse_contenders(
        "--algo",
        "auto,ring,ps,nccl,ring:pipe4,nccl:graph,oneshot:flag:graph",
    )
    .unwrap();
    assert_eq!(v.len(), 7);
    assert_eq!(v[3].kind, ContenderKind::Nccl(NcclBuffers::Plain));
    assert!(v[5].is_graph() && v[5].is_nccl());
    assert!(matches!(v[6].kind, ContenderKind::EngineGraph(_)));
    // NCCL on registered buffers and on symmetric windows (nccl-tests' -R 1
    // and -R 2), plain and from graphs.
    let v = parse_contenders("--algo", "nccl:reg,NCCL:SYM,nccl:reg:graph,nccl:sym:graph").unwrap();
    let kinds: Vec<_> = v.iter().map(|c| c.kind.clone()).collect();
    assert_eq!(
        kinds,
        [
            ContenderKind::Nccl(NcclBuffers::Registered),
            ContenderKind::Nccl(NcclBuffers::Symmetric),
            ContenderKind::NcclGraph(NcclBuffers::Registered),
            ContenderKind::NcclGraph(NcclBuffers::Symmetric),
        ]
    );
    assert_eq!(v[1].name, "nccl:sym");
    assert!(v.iter().all(Contender::is_nccl));
    assert_eq!(v[3].nccl_buffers(), Some(NcclBuffers::Symmetric));
    assert_eq!(v[3].calls_per_launch(), GRAPH_CALLS);
    for bad in ["nccl:registered", "nccl:sym:reg", "nccl:graph:sym"] {
        let e = parse_contenders("--algo", bad).unwrap_err().to_string();
        assert!(
            e.contains("unknown NCCL contender") && e.contains("nccl:sym"),
            "{bad}: {e}"
        );
    }
    assert!(parse_contenders("--algo", "ring,tree").is_err());
    assert!(parse_contenders("--algo", "").is_err());
}

/// A graph replays GRAPH_CALLS calls in place on the same buffers; the
/// bench's expectation of that (a 2-call in-place reduce-scatter graph
/// was reported wrong on 2 x H200 by the old check, which only knew
/// all-reduce) must equal the CPU engine running the calls back to back.
#[test]
fn in_place_calls_back_to_back_match_their_expectation() {
    use ringreduce::engine::EngineConfig;
    for collective in [
        Collective::AllReduce,
        Collective::ReduceScatter,
        Collective::AllGather,
    ] {
        for (op, n) in [
            (ReduceOp::Sum, 2),
            (ReduceOp::Sum, 3),
            (ReduceOp::Max, 3),
            (ReduceOp::Prod, 4),
        ] {
            let mut e = Engine::new(EngineConfig::cpu(n)).unwrap();
            let per = if collective == Collective::ReduceScatter {
                5 * n
            } else {
                5
            };
            let inputs: Vec<Vec<i32>> = (0..n)
                .map(|r| (0..per).map(|i| (r * 7 + i) as i32 % 5 - 2).collect())
                .collect();
            let shape = e.load(collective, &inputs, true).unwrap();
            let ring: AlgoChoice = "ring".parse().unwrap();
            for _ in 0..GRAPH_CALLS {
                e.run(Some(&ring), &shape, op).unwrap();
            }
            let out = e.read_output(&shape).unwrap();
            let want = if collective == Collective::ReduceScatter && n > 2 {
                expected_on_cpu("ring", collective, &inputs, op, GRAPH_CALLS).unwrap()
            } else {
                expected_in_place(collective, &inputs, op, GRAPH_CALLS)
            };
            let v = check_outputs(&out, &want);
            assert_eq!(v.total_wrong(), 0, "{collective:?} {op:?}: {out:?}");
            // One call less is a different answer where it should be.
            if collective != Collective::AllGather && op == ReduceOp::Sum {
                let once = expected(collective, &inputs, op, Inputs::Exact);
                assert!(check_outputs(&out, &once).total_wrong() > 0);
            }
        }
    }
}

#[test]
fn counts() {
    assert_eq!(count_for(Collective::AllReduce, 64, 4, 2), 16);
    assert_eq!(count_for(Collective::ReduceScatter, 64, 4, 2), 8);
    assert_eq!(count_for(Collective::AllGather, 4, 4, 2), 0);
}
