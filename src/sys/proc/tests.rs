use super::*;

#[test]
fn more_than_the_machine_holds_is_refused_before_it_is_asked_for() {
    // Refused by the ceiling, whatever the kernel's overcommit says:
    // 1 EiB is more than any machine here holds.
    let e = zeroed::<u8>(1 << 60, "a test's buffer").unwrap_err();
    assert!(
        matches!(&e, crate::error::Error::OutOfMemory { is_free: false, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("a test's buffer"), "{e}");
    assert_eq!(zeroed::<u32>(3, "three").unwrap(), vec![0; 3]);
}

#[test]
fn names_and_bad_pids() {
    assert_eq!(signal_name(9), "SIGKILL");
    assert_eq!(signal_name(15), "SIGTERM");
    for s in [Sig::Hup, Sig::Int, Sig::Term, Sig::Kill] {
        assert_eq!(Sig::from_raw(s.number()), Some(s));
    }
    assert_eq!(Sig::from_raw(libc::SIGSEGV), None);
    assert!(signal(0, Sig::Term).is_err(), "pid 0 would be our group");
    assert!(signal_group(0, Sig::Term).is_err());
    assert!(uid() < u32::MAX);
}

#[test]
fn a_child_can_be_signalled() {
    let mut c = Command::new("sleep");
    c.arg("30");
    die_with_parent(&mut c);
    let mut child = c.spawn().expect("spawn sleep");
    signal(child.id(), Sig::Term).unwrap();
    let st = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(st.signal(), Some(libc::SIGTERM));
}
