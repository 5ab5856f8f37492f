use super::*;

#[test]
fn writable_and_not() {
    check_writable(Path::new("/dev/null")).unwrap();
    check_writable(&std::env::temp_dir()).unwrap();
    let e = check_writable(Path::new("/nonexistent-rr/x")).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
    let e = check_writable(Path::new("a\0b")).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
}
