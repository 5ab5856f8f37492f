use super::*;

fn os(s: &str) -> OsString {
    OsString::from(s)
}

/// The message of a refused value, checked to name the variable, the
/// value and what is accepted.
fn refused<T: Clone + Send + Sync + std::fmt::Debug>(p: &Param<T>, v: &str) -> String {
    match p.parse(Some(&os(v))) {
        Err(e @ Error::Env { .. }) => {
            let m = e.to_string();
            assert!(m.contains(p.name), "{m}");
            assert!(m.contains(&format!("{v:?}")), "{m}");
            assert!(m.contains(p.accepted), "{m}");
            m
        }
        other => panic!("{}={v:?} must be refused: {other:?}", p.name),
    }
}

#[test]
fn timeout_values() {
    let p = &TIMEOUT;
    assert_eq!(p.parse(None).unwrap(), None);
    assert_eq!(p.parse(Some(&os(""))).unwrap(), None, "empty is unset");
    assert_eq!(p.parse(Some(&os("  "))).unwrap(), None, "blank is unset");
    assert_eq!(
        p.parse(Some(&os("2.5"))).unwrap(),
        Some(Duration::from_millis(2500))
    );
    assert_eq!(
        p.parse(Some(&os(" 60 "))).unwrap(),
        Some(Duration::from_secs(60))
    );
    assert_eq!(
        p.parse(Some(&os("1e7"))).unwrap(),
        Some(Duration::from_secs(10_000_000))
    );
    for (v, why) in [
        ("1e308", "out of range"),
        ("2e19", "out of range"),
        ("10000000.5", "out of range"),
        ("abc", "not a number"),
        ("0", "not greater than 0"),
        ("-1", "not greater than 0"),
        ("-0", "not greater than 0"),
        ("inf", "not finite"),
        ("-inf", "not finite"),
        ("NaN", "not a number"),
        ("1e-10", "shorter than 1 ns"),
        ("60s", "not a number"),
    ] {
        let m = refused(p, v);
        assert!(m.contains(why), "{v}: {m}");
    }
}

#[test]
fn size_values() {
    let p = &HOST_MEMORY;
    assert_eq!(p.parse(Some(&os(""))).unwrap(), None);
    assert_eq!(p.parse(Some(&os("64GiB"))).unwrap(), Some(64 << 30));
    assert_eq!(p.parse(Some(&os("1"))).unwrap(), Some(1));
    for (v, why) in [
        ("abc", "expected a number"),
        ("-1", "cannot be negative"),
        ("0", "0 bytes"),
        ("1e308", "unknown suffix"),
        ("inf", "expected a number"),
        ("99999999999TiB", "too large"),
        ("4XB", "unknown suffix"),
    ] {
        let m = refused(p, v);
        assert!(m.contains(why), "{v}: {m}");
    }
}

#[test]
fn whole_number_values() {
    let p = &RANK;
    assert_eq!(p.parse(Some(&os(""))).unwrap(), None);
    assert_eq!(p.parse(Some(&os("0"))).unwrap(), Some(0));
    assert_eq!(p.parse(Some(&os(" 7 "))).unwrap(), Some(7));
    for (v, why) in [
        ("abc", "not a whole number"),
        ("-1", "not a whole number"),
        ("1.5", "not a whole number"),
        ("1e308", "not a whole number"),
        ("inf", "not a whole number"),
        ("99999999999999999999999", "too large"),
    ] {
        let m = refused(p, v);
        assert!(m.contains(why), "{v}: {m}");
    }
}

#[test]
fn flag_values() {
    for p in [&PTX_JIT, &MULTIPROC] {
        assert_eq!(p.parse(Some(&os(""))).unwrap(), None);
        assert_eq!(p.parse(Some(&os("0"))).unwrap(), Some(false));
        assert_eq!(p.parse(Some(&os("1"))).unwrap(), Some(true));
        for v in ["2", "-1", "yes", "true", "1e308", "inf", "abc"] {
            assert!(refused(p, v).contains("neither 0 nor 1"));
        }
    }
}

#[test]
fn device_lists() {
    let p = &DEVICES;
    assert_eq!(p.parse(Some(&os(""))).unwrap(), None);
    assert_eq!(p.parse(Some(&os("1"))).unwrap(), Some(vec![1]));
    assert_eq!(p.parse(Some(&os("0, 1,0"))).unwrap(), Some(vec![0, 1, 0]));
    for v in ["a", "0,,1", "0,", "-1", "1.5", "1e308"] {
        refused(p, v);
    }
}

#[test]
fn fault_values() {
    let p = &FAULT;
    assert_eq!(p.parse(Some(&os(""))).unwrap(), None);
    assert_eq!(
        p.parse(Some(&os("nostart:rank=1")))
            .unwrap()
            .map(|v| v.len()),
        Some(1)
    );
    for v in ["garbage", "kill", "kill:rank=-1", "kill:rank=1:call=0"] {
        refused(p, v);
    }
}

#[test]
fn text_and_path_values() {
    use std::os::unix::ffi::OsStringExt;
    let not_utf8 = OsString::from_vec(vec![b'a', 0xff]);
    assert_eq!(
        RUN_ID.parse(Some(&os("run-1"))).unwrap().as_deref(),
        Some("run-1")
    );
    assert!(matches!(
        RUN_ID.parse(Some(&not_utf8)),
        Err(Error::Env { .. })
    ));
    // A path is any bytes.
    assert_eq!(
        STORE.parse(Some(&not_utf8)).unwrap(),
        Some(PathBuf::from(not_utf8.clone()))
    );
    assert_eq!(STORE.parse(Some(&os(""))).unwrap(), None);
    // A number that is not UTF-8 is refused as such.
    assert!(refused(&RANK, "\u{fffd}").contains("not a whole number"));
    let e = TIMEOUT.parse(Some(&not_utf8)).unwrap_err().to_string();
    assert!(e.contains("not valid UTF-8"), "{e}");
}

#[test]
fn the_cupti_knobs_take_their_words_and_refuse_others() {
    assert_eq!(
        CUPTI_TIE.parse(Some(&os("order"))).unwrap(),
        Some(CuptiTie::Order)
    );
    assert_eq!(
        CUPTI_TIE.parse(Some(&os("callback"))).unwrap(),
        Some(CuptiTie::Callback)
    );
    assert!(refused(&CUPTI_TIE, "Order").contains("neither callback nor order"));
    for (w, k) in [
        ("all", CuptiKinds::All),
        ("kernel", CuptiKinds::Kernel),
        ("copy", CuptiKinds::Copy),
    ] {
        assert_eq!(CUPTI_KINDS.parse(Some(&os(w))).unwrap(), Some(k));
    }
    assert!(refused(&CUPTI_KINDS, "memset").contains("not all, kernel or copy"));
    assert_eq!(CUPTI_KEEP.parse(Some(&os("1"))).unwrap(), Some(true));
    assert!(refused(&CUPTI_KEEP, "yes").contains("neither 0 nor 1"));
}

#[test]
fn timeout_arguments_state_the_range() {
    assert_eq!(
        timeout_arg("--timeout", 5.0).unwrap(),
        Duration::from_secs(5)
    );
    for t in [1e7 + 1.0, 1e308, 0.0, -1.0, f64::INFINITY, f64::NAN] {
        let m = timeout_arg("--timeout", t).unwrap_err().to_string();
        assert!(
            m.contains("--timeout must be") && m.contains(TIMEOUT_RANGE),
            "{m}"
        );
    }
}
