use super::*;

fn args(kind: Collective, send: u64, recv: u64, count: usize) -> CollArgs {
    CollArgs {
        kind,
        send,
        recv,
        count,
        datatype: datatype::FLOAT32,
        op: (kind != Collective::AllGather).then_some(redop::SUM),
        nranks: 4,
        rank: 1,
    }
}

const V2283: Version = Version::new(2, 28, 3);

fn reason(r: Result<(), NcclError>) -> String {
    match r {
        Err(NcclError::Invalid { reason, .. }) => reason,
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn version_codes() {
    assert_eq!(version_code_to_string(22803), "2.28.3");
    assert_eq!(version_code_to_string(2708), "2.7.8");
    assert_eq!(version_code_to_string(20900), "2.9.0");
    assert_eq!(version_code_to_string(21805), "2.18.5");
    assert_eq!(version_code_to_string(2000), "2.0.0");
    assert_eq!(version_code_to_string(0), "0");
    assert_eq!(version_code_to_string(-3), "-3");
    assert_eq!(Version::from_code(22400), Some(Version::new(2, 24, 0)));
    assert_eq!(Version::from_code(0), None);
    assert!(Version::new(2, 9, 9) < Version::new(2, 10, 0));
    assert!(Version::from_code(2708) < Version::from_code(21003));
    assert_eq!(Version::new(2, 24, 0).to_string(), "2.24.0");
}

#[test]
fn result_codes() {
    for raw in 1..=7 {
        let code = ResultCode::from_raw(raw);
        assert_eq!(code.raw(), raw);
        assert!(code.name().is_some());
    }
    assert_eq!(ResultCode::from_raw(5), ResultCode::InvalidUsage);
    assert_eq!(
        ResultCode::from_raw(6).to_string(),
        "ncclRemoteError (6)".to_string()
    );
    assert_eq!(
        ResultCode::from_raw(1).to_string(),
        "ncclUnhandledCudaError (1)"
    );
    assert_eq!(ResultCode::from_raw(7).to_string(), "ncclInProgress (7)");
    assert_eq!(ResultCode::from_raw(42), ResultCode::Other(42));
    assert_eq!(ResultCode::from_raw(42).to_string(), "ncclResult_t 42");
}

#[test]
fn tables() {
    assert_eq!(datatype_name(datatype::FLOAT32), Some("ncclFloat32"));
    assert_eq!(datatype_name(datatype::BFLOAT16), Some("ncclBfloat16"));
    assert_eq!(datatype_name(datatype::FLOAT8E5M2), Some("ncclFloat8e5m2"));
    assert_eq!(datatype_name(12), None);
    assert_eq!(datatype_name(-1), None);
    assert_eq!(datatype_size(datatype::FLOAT64), Some(8));
    assert_eq!(datatype_size(datatype::FLOAT16), Some(2));
    assert_eq!(datatype_size(datatype::FLOAT8E4M3), Some(1));
    assert_eq!(op_name(redop::SUM), Some("ncclSum"));
    assert_eq!(op_name(redop::AVG), Some("ncclAvg"));
    assert_eq!(op_name(5), None);
}

#[test]
fn datatype_and_op_against_version() {
    let ok = args(Collective::AllReduce, 0x1000, 0x9000, 16);
    assert!(ok.validate(V2283, Path::new("lib")).is_ok());

    for bad in [-1, 12, 255] {
        let a = CollArgs {
            datatype: bad,
            ..ok
        };
        let r = reason(a.validate(V2283, Path::new("lib")));
        assert!(r.contains(&format!("datatype {bad} ")), "{r}");
    }
    for bad in [-1, 5, 9] {
        let a = CollArgs {
            op: Some(bad),
            ..ok
        };
        let r = reason(a.validate(V2283, Path::new("lib")));
        assert!(r.contains(&format!("op {bad} ")), "{r}");
    }

    // fp8 needs 2.24: named with the version of the library.
    let fp8 = CollArgs {
        datatype: datatype::FLOAT8E4M3,
        ..ok
    };
    match fp8.validate(Version::new(2, 23, 4), Path::new("/x/libnccl.so.2")) {
        Err(e @ NcclError::Unsupported { .. }) => assert_eq!(
            e.to_string(),
            "ncclAllReduce: datatype 10 (ncclFloat8e4m3) needs NCCL >= 2.24.0, \
                 but /x/libnccl.so.2 is NCCL 2.23.4"
        ),
        other => panic!("expected Unsupported, got {other:?}"),
    }
    assert!(fp8
        .validate(Version::new(2, 24, 3), Path::new("lib"))
        .is_ok());
    let e5 = CollArgs {
        datatype: datatype::FLOAT8E5M2,
        ..ok
    };
    assert!(matches!(
        e5.validate(V2283.min(Version::new(2, 18, 1)), Path::new("lib")),
        Err(NcclError::Unsupported { needs, .. }) if needs == Version::new(2, 24, 0)
    ));

    // bf16 and avg need 2.10.
    let old = Version::new(2, 7, 8);
    let bf16 = CollArgs {
        datatype: datatype::BFLOAT16,
        ..ok
    };
    assert!(matches!(
        bf16.validate(old, Path::new("lib")),
        Err(NcclError::Unsupported { needs, .. }) if needs == Version::new(2, 10, 0)
    ));
    let avg = CollArgs {
        op: Some(redop::AVG),
        ..ok
    };
    match avg.validate(old, Path::new("lib")) {
        Err(NcclError::Unsupported { what, .. }) => assert_eq!(what, "op 4 (ncclAvg)"),
        other => panic!("expected Unsupported, got {other:?}"),
    }
    assert!(avg
        .validate(Version::new(2, 10, 3), Path::new("lib"))
        .is_ok());
    assert!(bf16
        .validate(Version::new(2, 10, 3), Path::new("lib"))
        .is_ok());
    // All-gather takes no op: a bogus op field is never looked at.
    let gather = CollArgs {
        op: None,
        ..args(Collective::AllGather, 0x1000, 0x9000, 16)
    };
    assert!(gather.validate(old, Path::new("lib")).is_ok());
}

#[test]
fn counts_must_fit() {
    let base = args(Collective::AllReduce, 0x1000, 0x10_0000_0000, 0);
    // Zero elements: null pointers are fine, nothing is touched.
    let empty = CollArgs {
        send: 0,
        recv: 0,
        ..base
    };
    assert!(empty.validate(V2283, Path::new("lib")).is_ok());
    let huge = CollArgs {
        count: usize::MAX / 2,
        ..base
    };
    let r = reason(huge.validate(V2283, Path::new("lib")));
    assert!(r.contains("does not fit the address space"), "{r}");
    let r = reason(
        CollArgs {
            count: usize::MAX / 2,
            ..args(Collective::AllGather, 0x1000, 0x9000, 0)
        }
        .validate(V2283, Path::new("lib")),
    );
    assert!(r.contains("overflows usize"), "{r}");
    // isize::MAX / 4 f32 fits; times 4 ranks it no longer does.
    let per_rank = (isize::MAX as usize) / 4 / 4 + 1;
    let r = reason(
        CollArgs {
            count: per_rank,
            ..args(Collective::ReduceScatter, 0x1000, 0x9000, 0)
        }
        .validate(V2283, Path::new("lib")),
    );
    assert!(r.contains("sendbuff of"), "{r}");
    let wrap = CollArgs {
        send: u64::MAX - 8,
        count: 4,
        ..base
    };
    let r = reason(wrap.validate(V2283, Path::new("lib")));
    assert!(r.contains("wraps around"), "{r}");
}

#[test]
fn null_and_rank() {
    let r = reason(args(Collective::AllReduce, 0, 0x9000, 4).validate(V2283, Path::new("lib")));
    assert!(r.contains("sendbuff is null but holds 16 bytes"), "{r}");
    let r = reason(args(Collective::AllGather, 0x1000, 0, 4).validate(V2283, Path::new("lib")));
    assert!(r.contains("recvbuff is null but holds 64 bytes"), "{r}");
    let bad_rank = CollArgs {
        rank: 4,
        ..args(Collective::AllReduce, 0x1000, 0x9000, 4)
    };
    assert!(reason(bad_rank.validate(V2283, Path::new("lib"))).contains("rank 4 of 4"));
}

#[test]
fn overlap_and_in_place_layouts() {
    // 4 ranks, this is rank 1, 16 f32 = 64 bytes per rank slice.
    let n = 16;
    let base = 0x10_0000u64;
    // All-reduce: in place only when identical.
    assert!(args(Collective::AllReduce, base, base, n)
        .validate(V2283, Path::new("lib"))
        .is_ok());
    assert!(args(Collective::AllReduce, base, base + 64, n)
        .validate(V2283, Path::new("lib"))
        .is_ok());
    let r =
        reason(args(Collective::AllReduce, base, base + 60, n).validate(V2283, Path::new("lib")));
    assert!(
        r.contains("overlap") && r.contains("recvbuff == sendbuff"),
        "{r}"
    );

    // Reduce-scatter: recv is rank 1's slice of send (send holds 4 x 64 bytes).
    assert!(args(Collective::ReduceScatter, base, base + 64, n)
        .validate(V2283, Path::new("lib"))
        .is_ok());
    assert!(args(Collective::ReduceScatter, base, base + 256, n)
        .validate(V2283, Path::new("lib"))
        .is_ok());
    let r =
        reason(args(Collective::ReduceScatter, base, base, n).validate(V2283, Path::new("lib")));
    assert!(
        r.contains("recvbuff == sendbuff + rank * recvcount * size"),
        "{r}"
    );
    assert!(reason(
        args(Collective::ReduceScatter, base, base + 128, n).validate(V2283, Path::new("lib"))
    )
    .contains("overlap"));

    // All-gather: send is rank 1's slice of recv.
    assert!(args(Collective::AllGather, base + 64, base, n)
        .validate(V2283, Path::new("lib"))
        .is_ok());
    assert!(args(Collective::AllGather, base + 256, base, n)
        .validate(V2283, Path::new("lib"))
        .is_ok());
    let r = reason(args(Collective::AllGather, base, base, n).validate(V2283, Path::new("lib")));
    assert!(
        r.contains("sendbuff == recvbuff + rank * sendcount * size"),
        "{r}"
    );
    // Rank 0's in-place all-gather is the identical pointer.
    let rank0 = CollArgs {
        rank: 0,
        ..args(Collective::AllGather, base, base, n)
    };
    assert!(rank0.validate(V2283, Path::new("lib")).is_ok());
}
