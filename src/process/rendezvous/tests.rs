use super::*;

#[test]
fn the_control_key_round_trips_and_refuses_foreign_values() {
    let v = encode("run-7", std::path::Path::new("/proc/12/fd/5"));
    assert_eq!(
        decode(&v),
        Some(("run-7".to_string(), "/proc/12/fd/5".into()))
    );
    for bad in [
        &b""[..],
        b"run",
        b"\n/proc/1/fd/2",
        b"run\n",
        b"run\nrelative",
        b"\xff\n/x",
    ] {
        assert_eq!(decode(bad), None, "{bad:?}");
    }
}

#[test]
fn a_local_store_waits_for_a_key_and_says_when_it_never_came() {
    let kv = Arc::new(LocalKeyValue::default());
    let k2 = kv.clone();
    let t = std::thread::spawn(move || k2.get("a", Duration::from_secs(10)));
    std::thread::sleep(Duration::from_millis(20));
    kv.set("a", b"x").unwrap();
    assert_eq!(t.join().unwrap().unwrap(), Some(b"x".to_vec()));
    assert_eq!(kv.get("b", Duration::from_millis(30)).unwrap(), None);
}
