use super::super::testutil::{fake_or_skip, Counts, Fake, TempDir};
use super::*;

/// Loads a freshly built fake NCCL, or `None` (test skipped) without a C compiler.
fn fake(tag: &str, version: i32, defines: &[&str]) -> Option<(TempDir, Fake, Nccl)> {
    let tmp = TempDir::new(tag);
    let fake = fake_or_skip(&tmp, "libnccl.so.2", version, defines)?;
    let nccl = Nccl::load(Some(&fake.path)).unwrap();
    Some((tmp, fake, nccl))
}

fn stream() -> CUstream {
    0x5757 as CUstream
}

// The collectives, callable safely against a fake library: it only records its
// arguments and never touches the (made-up) device addresses or the stream.

fn ar(
    nccl: &Nccl,
    s: u64,
    r: u64,
    n: usize,
    dt: i32,
    op: i32,
    comm: &Comm,
) -> Result<(), NcclError> {
    // SAFETY: only used with fake libraries (see above).
    unsafe { nccl.all_reduce(s, r, n, dt, op, comm, stream()) }
}

fn ar32(nccl: &Nccl, s: u64, r: u64, n: usize, comm: &Comm) -> Result<(), NcclError> {
    // SAFETY: only used with fake libraries (see above).
    unsafe { nccl.all_reduce_f32_sum(s, r, n, comm, stream()) }
}

fn rs(
    nccl: &Nccl,
    s: u64,
    r: u64,
    n: usize,
    dt: i32,
    op: i32,
    comm: &Comm,
) -> Result<(), NcclError> {
    // SAFETY: only used with fake libraries (see above).
    unsafe { nccl.reduce_scatter(s, r, n, dt, op, comm, stream()) }
}

fn ag(nccl: &Nccl, s: u64, r: u64, n: usize, dt: i32, comm: &Comm) -> Result<(), NcclError> {
    // SAFETY: only used with fake libraries (see above).
    unsafe { nccl.all_gather(s, r, n, dt, comm, stream()) }
}

#[test]
fn auto_traits() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Nccl>();
    send_sync::<UniqueId>();
    send_sync::<NcclError>();
    send::<Comm>();
    assert_eq!(std::mem::size_of::<UniqueId>(), 128);
    assert_eq!(std::mem::align_of::<UniqueId>(), 1);
}

#[test]
fn unique_id_round_trip() {
    let mut bytes = [0u8; UNIQUE_ID_BYTES];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = (i * 31 + 5) as u8;
    }
    let id = UniqueId::from_bytes(&bytes).unwrap();
    assert_eq!(id.as_bytes(), &bytes);
    let again = UniqueId::from_bytes(id.as_bytes()).unwrap();
    assert_eq!(again, id);
    assert_eq!(
        format!("{id:?}"),
        "UniqueId(0524436281a0bfdefd1c3b5a7998b7d6..)"
    );
    for len in [0, 127, 129] {
        match UniqueId::from_bytes(&vec![0; len]) {
            Err(e @ NcclError::Invalid { .. }) => assert_eq!(
                e.to_string(),
                format!(
                    "UniqueId::from_bytes: invalid argument: an ncclUniqueId is 128 bytes, \
                         got {len}"
                )
            ),
            other => panic!("expected Invalid, got {other:?}"),
        }
    }
}

#[test]
fn error_display() {
    let e = NcclError::Call {
        call: "ncclAllReduce",
        code: ResultCode::InvalidUsage,
        message: "invalid usage".into(),
        last_error: Some("comm 0x1 rank 0 busy".into()),
    };
    assert_eq!(
        e.to_string(),
        "ncclAllReduce failed: ncclInvalidUsage (5): invalid usage \
             (last error: comm 0x1 rank 0 busy)"
    );
    let e = NcclError::Call {
        call: "ncclCommInitRank",
        code: ResultCode::from_raw(2),
        message: "unhandled system error".into(),
        last_error: None,
    };
    assert_eq!(
        e.to_string(),
        "ncclCommInitRank failed: ncclSystemError (2): unhandled system error"
    );
    let e = NcclError::Symbol {
        path: "/x/libnccl.so.2".into(),
        symbol: "ncclAllReduce",
    };
    assert_eq!(
        e.to_string(),
        "NCCL library /x/libnccl.so.2 lacks symbol ncclAllReduce"
    );
    let e = NcclError::Unavailable {
        call: "ncclCommAbort",
        version: Version::new(2, 3, 7),
        path: "/x/libnccl.so.2".into(),
    };
    assert_eq!(
        e.to_string(),
        "ncclCommAbort is not available in NCCL 2.3.7 (/x/libnccl.so.2 does not export it)"
    );
}

#[test]
fn symbol_helper_in_isolation() {
    // libc is always there: one of its symbols resolves, an NCCL one does not.
    let Ok(lib) = discover::open_library(std::ffi::OsStr::new("libc.so.6")) else {
        eprintln!("SKIPPED: no libc.so.6");
        return;
    };
    let path = Path::new("libc.so.6");
    // SAFETY: getpid is `pid_t getpid(void)`; the value is not called after `lib` closes.
    let getpid: Result<unsafe extern "C" fn() -> c_int, _> = unsafe { sym(&lib, path, "getpid") };
    assert!(getpid.is_ok());
    // SAFETY: never called (it does not resolve).
    let missing: Result<ReduceFn, _> = unsafe { sym(&lib, path, "ncclAllReduce") };
    match missing {
        Err(NcclError::Symbol { path, symbol }) => {
            assert_eq!(path, "libc.so.6");
            assert_eq!(symbol, "ncclAllReduce");
        }
        other => panic!("expected Symbol, got {:?}", other.map(|_| ())),
    }
    // SAFETY: never called (it does not resolve).
    let opt: Option<CommFn> = unsafe { optional_sym(&lib, path, "ncclCommAbort") };
    assert!(opt.is_none());
}

#[test]
fn missing_required_symbol_is_a_symbol_error() {
    let tmp = TempDir::new("no-allreduce");
    let Some(fake) = fake_or_skip(&tmp, "libnccl.so.2", 22803, &["NO_ALLREDUCE"]) else {
        return;
    };
    match Nccl::load(Some(&fake.path)) {
        Err(NcclError::Symbol { path, symbol }) => {
            assert_eq!(path, fake.path.display().to_string());
            assert_eq!(symbol, "ncclAllReduce");
        }
        other => panic!("expected Symbol, got {other:?}"),
    }
}

#[test]
fn fake_library_end_to_end() {
    let Some((_tmp, fake, nccl)) = fake("e2e", 22803, &[]) else {
        return;
    };
    assert_eq!(nccl.path(), fake.path.as_path());
    assert_eq!(nccl.version().unwrap(), 22803);
    assert_eq!(nccl.version_info(), Version::new(2, 28, 3));
    assert_eq!(nccl.version_string().unwrap(), "2.28.3");
    let (id, comm) = e2e_init(&fake, &nccl);
    e2e_collectives(&fake, &nccl, &comm);
    e2e_rejected(&fake, &nccl, &comm);
    e2e_errors_and_teardown(&fake, &nccl, comm, &id);
}

/// Groups, the unique id and communicators, good and bad.
fn e2e_init(fake: &Fake, nccl: &Nccl) -> (UniqueId, Comm) {
    nccl.group_start().unwrap();
    nccl.group_end().unwrap();

    // The id goes through bytes (as between processes) and by value into NCCL, which
    // rejects it unless all 128 bytes arrived.
    let id = nccl.unique_id().unwrap();
    let id = UniqueId::from_bytes(id.as_bytes().as_slice()).unwrap();
    let comm = nccl.comm_init_rank(4, &id, 1).unwrap();
    assert_eq!((comm.rank(), comm.nranks()), (1, 4));
    assert_eq!(comm.library_path(), fake.path.as_path());
    assert!(comm.can_abort());
    let c = fake.counts();
    assert_eq!((c.init_nranks, c.init_rank), (4, 1));
    let bad = UniqueId::from_bytes(&[0; 128]).unwrap();
    match nccl.comm_init_rank(2, &bad, 0) {
        Err(NcclError::Call {
            call,
            code,
            message,
            last_error,
        }) => {
            assert_eq!(call, "ncclCommInitRank");
            assert_eq!(code, ResultCode::InvalidArgument);
            assert_eq!(message, "fake NCCL error");
            assert_eq!(last_error.as_deref(), Some("fake last error"));
        }
        other => panic!("expected Call, got {other:?}"),
    }
    for (n, r) in [(0, 0), (2, 2), (usize::MAX, 0)] {
        assert!(matches!(
            nccl.comm_init_rank(n, &id, r),
            Err(NcclError::Invalid {
                call: "ncclCommInitRank",
                ..
            })
        ));
    }

    (id, comm)
}

/// Each collective reaches NCCL with its arguments as given.
fn e2e_collectives(fake: &Fake, nccl: &Nccl, comm: &Comm) {
    let raw = comm.raw as usize;
    ar(
        nccl,
        0x1000,
        0x2000,
        16,
        datatype::FLOAT64,
        redop::MAX,
        comm,
    )
    .unwrap();
    assert_eq!(fake.last(), [1, 0x1000, 0x2000, 16, 8, 2, raw, 0x5757]);
    ar32(nccl, 0x3000, 0x3000, 5, comm).unwrap();
    assert_eq!(fake.last(), [1, 0x3000, 0x3000, 5, 7, 0, raw, 0x5757]);
    // Reduce-scatter in place: recv is rank 1's block of send (16 bf16 = 32 bytes).
    rs(
        nccl,
        0x10000,
        0x10020,
        16,
        datatype::BFLOAT16,
        redop::AVG,
        comm,
    )
    .unwrap();
    assert_eq!(fake.last(), [2, 0x10000, 0x10020, 16, 9, 4, raw, 0x5757]);
    // fp8 is known to 2.28.
    ag(nccl, 0x20000, 0x40000, 64, datatype::FLOAT8E5M2, comm).unwrap();
    assert_eq!(
        fake.last(),
        [3, 0x20000, 0x40000, 64, 11, usize::MAX, raw, 0x5757]
    );
    assert_eq!(fake.counts().calls, 4);
}

/// Arguments rejected before NCCL: the call count does not move.
fn e2e_rejected(fake: &Fake, nccl: &Nccl, comm: &Comm) {
    let e = ar(nccl, 0x1000, 0x2000, 4, 12, redop::SUM, comm);
    assert!(matches!(
        e,
        Err(NcclError::Invalid {
            call: "ncclAllReduce",
            ..
        })
    ));
    let e = rs(nccl, 0x1000, 0x2000, 4, datatype::INT8, 5, comm);
    assert!(matches!(
        e,
        Err(NcclError::Invalid {
            call: "ncclReduceScatter",
            ..
        })
    ));
    let e = ag(nccl, 0x1000, 0x1000, 4, datatype::INT32, comm);
    assert!(matches!(
        e,
        Err(NcclError::Invalid {
            call: "ncclAllGather",
            ..
        })
    ));
    let e = ar(nccl, 0, 0x2000, 4, datatype::INT32, 0, comm);
    assert!(matches!(e, Err(NcclError::Invalid { .. })));
    assert_eq!(fake.counts().calls, 4);
}

/// NCCL's errors, synchronous and asynchronous, then abort and destroy.
fn e2e_errors_and_teardown(fake: &Fake, nccl: &Nccl, comm: Comm, id: &UniqueId) {
    // An NCCL failure carries the call, the code and its name, the string and last error.
    fake.set_next(5);
    let e = ar32(nccl, 0x1000, 0x2000, 4, &comm).unwrap_err();
    assert_eq!(
        e.to_string(),
        "ncclAllReduce failed: ncclInvalidUsage (5): invalid usage (run with \
             NCCL_DEBUG=WARN for details) (last error: fake last error)"
    );

    // Asynchronous errors.
    assert!(comm.async_error().unwrap().is_none());
    fake.set_async(6);
    match comm.async_error().unwrap() {
        Some(NcclError::Call { call, code, .. }) => {
            assert_eq!(call, "ncclCommGetAsyncError");
            assert_eq!(code, ResultCode::RemoteError);
        }
        other => panic!("expected an async error, got {other:?}"),
    }

    // Abort consumes the communicator and does not destroy it as well.
    comm.abort().unwrap();
    let c = fake.counts();
    assert_eq!((c.aborted, c.destroyed), (1, 0));
    // Drop destroys.
    let comm = nccl.comm_init_rank(2, id, 0).unwrap();
    drop(comm);
    let Counts {
        aborted, destroyed, ..
    } = fake.counts();
    assert_eq!((aborted, destroyed), (1, 1));
}

#[test]
fn old_nccl_reports_what_it_lacks() {
    let Some((_tmp, fake, nccl)) = fake("old", 2708, &["OLD"]) else {
        return;
    };
    assert_eq!(nccl.version_string().unwrap(), "2.7.8");
    let id = nccl.unique_id().unwrap();
    let comm = nccl.comm_init_rank(2, &id, 0).unwrap();
    assert!(!comm.can_abort());
    let path = fake.path.display().to_string();

    let e = rs(&nccl, 0x1000, 0x9000, 4, 7, 0, &comm);
    match e {
        Err(e @ NcclError::Unavailable { .. }) => assert_eq!(
            e.to_string(),
            format!("ncclReduceScatter is not available in NCCL 2.7.8 ({path} does not export it)")
        ),
        other => panic!("expected Unavailable, got {other:?}"),
    }
    let e = ag(&nccl, 0x1000, 0x9000, 4, 7, &comm);
    assert!(matches!(
        e,
        Err(NcclError::Unavailable {
            call: "ncclAllGather",
            ..
        })
    ));
    assert!(matches!(
        comm.async_error(),
        Err(NcclError::Unavailable {
            call: "ncclCommGetAsyncError",
            ..
        })
    ));

    // bf16 and avg arrived in 2.10, fp8 in 2.24.
    for (dt, op, what, needs) in [
        (
            datatype::BFLOAT16,
            redop::SUM,
            "datatype 9 (ncclBfloat16)",
            "2.10.0",
        ),
        (datatype::FLOAT32, redop::AVG, "op 4 (ncclAvg)", "2.10.0"),
        (
            datatype::FLOAT8E4M3,
            redop::SUM,
            "datatype 10 (ncclFloat8e4m3)",
            "2.24.0",
        ),
    ] {
        let e = ar(&nccl, 0x1000, 0x9000, 4, dt, op, &comm);
        match e {
            Err(e @ NcclError::Unsupported { .. }) => assert_eq!(
                e.to_string(),
                format!("ncclAllReduce: {what} needs NCCL >= {needs}, but {path} is NCCL 2.7.8")
            ),
            other => panic!("expected Unsupported, got {other:?}"),
        }
    }
    assert_eq!(fake.counts().calls, 0);

    // Without ncclGetLastError an error has no last-error text.
    fake.set_next(3);
    match ar32(&nccl, 0x1000, 0x9000, 4, &comm) {
        Err(NcclError::Call {
            code, last_error, ..
        }) => {
            assert_eq!(code, ResultCode::InternalError);
            assert_eq!(last_error, None);
        }
        other => panic!("expected Call, got {other:?}"),
    }

    // Abort is unavailable: the communicator is leaked, neither aborted nor destroyed.
    assert!(matches!(
        comm.abort(),
        Err(NcclError::Unavailable {
            call: "ncclCommAbort",
            ..
        })
    ));
    let c = fake.counts();
    assert_eq!((c.aborted, c.destroyed), (0, 0));
}

#[test]
fn fp8_needs_2_24() {
    let Some((_tmp, _fake, nccl)) = fake("fp8", 22304, &[]) else {
        return;
    };
    let id = nccl.unique_id().unwrap();
    let comm = nccl.comm_init_rank(1, &id, 0).unwrap();
    let e = ag(&nccl, 0x1000, 0x9000, 8, datatype::FLOAT8E4M3, &comm);
    match e {
        Err(NcclError::Unsupported { needs, version, .. }) => {
            assert_eq!(needs, Version::new(2, 24, 0));
            assert_eq!(version, Version::new(2, 23, 4));
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    // bf16 is fine on 2.23.
    ag(&nccl, 0x1000, 0x9000, 8, datatype::BFLOAT16, &comm).unwrap();
}

#[test]
fn comm_is_driven_only_by_its_library() {
    let Some((_t1, _f1, a)) = fake("lib-a", 22803, &[]) else {
        return;
    };
    let Some((_t2, f2, b)) = fake("lib-b", 22803, &[]) else {
        return;
    };
    let id = a.unique_id().unwrap();
    let comm = a.comm_init_rank(1, &id, 0).unwrap();
    let e = ar32(&b, 0x1000, 0x2000, 4, &comm);
    match e {
        Err(NcclError::Invalid { call, reason }) => {
            assert_eq!(call, "ncclAllReduce");
            assert!(reason.contains("created by"), "{reason}");
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
    assert_eq!(f2.counts().calls, 0);
    // A clone of the same library and a second load of the same file are the same library.
    let a2 = a.clone();
    ar32(&a2, 0x1000, 0x2000, 4, &comm).unwrap();
    let a3 = Nccl::load(Some(a.path())).unwrap();
    ar32(&a3, 0x1000, 0x2000, 4, &comm).unwrap();
}

#[test]
fn registration_windows_and_nccl_memory() {
    let Some((_tmp, fake, nccl)) = fake("reg", 22809, &[]) else {
        return;
    };
    let id = nccl.unique_id().unwrap();
    let comm = nccl.comm_init_rank(2, &id, 0).unwrap();
    // NCCL's allocator: one live allocation until it is dropped.
    let mem = nccl.mem_alloc(4096).unwrap();
    let p = mem.ptr();
    assert!(p != 0 && mem.len() == 4096);
    assert_eq!(fake.reg_counts()[2], 1);
    // SAFETY: the fake library only records the range; it stays allocated until the drop.
    let buf = unsafe { comm.register(Registration::Buffer, p, 4096) }.unwrap();
    // SAFETY: as above (one rank of the fake's communicator registers alone).
    let win = unsafe { comm.register(Registration::Symmetric, p, 4096) }.unwrap();
    assert_eq!(buf.kind(), Registration::Buffer);
    assert_eq!(win.range(), (p, 4096));
    // One of each, the window with NCCL_WIN_COLL_SYMMETRIC.
    assert_eq!(fake.reg_counts(), [1, 1, 1, 1]);
    // Only the communicator that made a registration undoes it.
    let other = nccl.comm_init_rank(2, &id, 1).unwrap();
    // SAFETY: refused before NCCL is called.
    let e = unsafe { other.deregister(buf) }.unwrap_err();
    assert!(matches!(e, NcclError::Invalid { .. }), "{e:?}");
    // SAFETY: the fake library only records the range.
    let buf = unsafe { comm.register(Registration::Buffer, p, 4096) }.unwrap();
    assert_eq!(fake.reg_counts()[0], 2);
    // SAFETY: nothing was enqueued on the buffer.
    unsafe { comm.deregister(buf) }.unwrap();
    // SAFETY: as above.
    unsafe { comm.deregister(win) }.unwrap();
    assert_eq!(&fake.reg_counts()[..3], &[1, 0, 1]);
    drop(mem);
    assert_eq!(fake.reg_counts()[2], 0);
    // Another, dropped at once, is freed too.
    drop(nccl.mem_alloc(16).unwrap());
    assert_eq!(fake.reg_counts()[2], 0);
    // Bad input is refused before NCCL is called.
    for (p, n) in [(0u64, 64usize), (0x1000, 0)] {
        // SAFETY: refused before NCCL sees it.
        let e = unsafe { comm.register(Registration::Buffer, p, n) }.unwrap_err();
        assert!(
            matches!(
                e,
                NcclError::Invalid {
                    call: "ncclCommRegister",
                    ..
                }
            ),
            "{e:?}"
        );
    }
    assert!(matches!(
        nccl.mem_alloc(0),
        Err(NcclError::Invalid {
            call: "ncclMemAlloc",
            ..
        })
    ));
}

#[test]
fn an_nccl_without_registration_says_so() {
    let Some((_tmp, fake, nccl)) = fake("noreg", 2708, &["OLD"]) else {
        return;
    };
    let id = nccl.unique_id().unwrap();
    let comm = nccl.comm_init_rank(2, &id, 0).unwrap();
    let path = fake.path.display().to_string();
    // SAFETY: refused before NCCL is called (the entry point is absent).
    let e = unsafe { comm.register(Registration::Symmetric, 0x1000, 64) }.unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "ncclCommWindowRegister is not available in NCCL 2.7.8 ({path} does not export it)"
        )
    );
    // SAFETY: as above.
    let e = unsafe { comm.register(Registration::Buffer, 0x1000, 64) }.unwrap_err();
    assert!(matches!(
        e,
        NcclError::Unavailable {
            call: "ncclCommRegister",
            ..
        }
    ));
    assert!(matches!(
        nccl.mem_alloc(64),
        Err(NcclError::Unavailable {
            call: "ncclMemAlloc",
            ..
        })
    ));
}
