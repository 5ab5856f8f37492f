use super::*;

/// The one injection both backends run: what each fault does at its op,
/// and nothing at any other op, call or rank.
#[test]
fn inject_does_each_fault_at_its_op_only() {
    let spec = |fault, call| FaultSpec {
        rank: 1,
        op: 2,
        call,
        fault,
    };
    let at = || "rank 1's op 2".to_string();
    let one = |f: Fault| FaultPlan(vec![spec(f, Some(3))]).inject(1, 2, 3, &at);
    assert_eq!(
        one(Fault::Stall),
        Some(Injected::Stall("injected stall at rank 1's op 2".into()))
    );
    assert_eq!(
        one(Fault::Fail),
        Some(Injected::Fail("rank 1's op 2: injected failure".into()))
    );
    assert_eq!(one(Fault::Kill), Some(Injected::Kill));
    assert_eq!(one(Fault::AllocFail), None, "an allocation's fault");
    let t = std::time::Instant::now();
    assert_eq!(one(Fault::Delay { ms: 20 }), None);
    assert!(t.elapsed() >= std::time::Duration::from_millis(20));
    let p = std::panic::catch_unwind(|| one(Fault::Panic)).expect_err("panics");
    let msg = p.downcast_ref::<String>().cloned().unwrap_or_default();
    assert_eq!(msg, "injected panic at rank 1's op 2");
    // Another op, call or rank: nothing.
    let plan = FaultPlan(vec![spec(Fault::Fail, Some(3))]);
    for (r, op, call) in [(0, 2, 3), (1, 1, 3), (1, 2, 4)] {
        assert_eq!(plan.inject(r, op, call, &at), None, "{r} {op} {call}");
    }
    // No call named: every call.
    let every = FaultPlan(vec![spec(Fault::Kill, None)]);
    assert!((1..5).all(|c| every.inject(1, 2, c, &at) == Some(Injected::Kill)));
}

#[test]
fn env_fault_specs() {
    let f = parse_env_faults("kill:rank=1:call=3:op=2, nostart:rank=2").unwrap();
    assert_eq!(
        f,
        vec![
            EnvFault {
                rank: 1,
                kind: EnvFaultKind::Kill { call: 3, op: 2 }
            },
            EnvFault {
                rank: 2,
                kind: EnvFaultKind::NoStart
            }
        ]
    );
    let plan = env_fault_plan(&f, 1);
    assert_eq!(plan.at(1, 2, 3), Some(Fault::Kill));
    assert!(env_fault_plan(&f, 2).is_empty(), "nostart is no plan fault");
    assert!(env_fault_plan(&f, 0).is_empty());
    // Defaults: call 1, op 1; after_calls=N is call N+1.
    assert_eq!(
        parse_env_faults("kill:rank=0").unwrap()[0].kind,
        EnvFaultKind::Kill { call: 1, op: 1 }
    );
    assert_eq!(
        parse_env_faults("kill:rank=0:after_calls=4").unwrap()[0].kind,
        EnvFaultKind::Kill { call: 5, op: 1 }
    );
}

#[test]
fn malformed_env_fault_specs_are_refused() {
    for (spec, why) in [
        ("garbage", "unknown fault"),
        ("", "empty entry"),
        ("kill:rank=1,", "empty entry"),
        ("kill", "names no rank"),
        ("kill:call=3", "names no rank"),
        ("kill:rank=x", "not a whole number"),
        ("kill:rank=-1", "not a whole number"),
        ("kill:rank=1:call=0", "count from 1"),
        ("kill:rank=1:call=2:after_calls=1", "give one"),
        ("kill:rank=1:rank=2", "twice"),
        ("kill:rank=1:when=3", "kill takes"),
        ("nostart:rank=1:call=3", "nostart takes"),
        ("kill:rank=1:call", "not key=value"),
        ("kill:rank=1:after_calls=18446744073709551615", "too large"),
    ] {
        let e = parse_env_faults(spec).expect_err(spec);
        assert!(e.contains(why), "{spec:?}: {e}");
    }
}
