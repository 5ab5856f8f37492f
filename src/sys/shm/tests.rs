use super::*;
use std::sync::atomic::Ordering;

#[test]
fn two_mappings_of_one_file_share_memory() {
    let dir = std::env::temp_dir().join(format!("rr-shm-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("seg");
    std::fs::File::create(&p).unwrap().set_len(4096).unwrap();
    let mut a = Mapping::open(&p, 4096).unwrap();
    let mut b = Mapping::open(&p, 4096).unwrap();
    a.words()[3].store(77, Ordering::Release);
    assert_eq!(b.words()[3].load(Ordering::Acquire), 77);
    a.bytes_mut()[100] = 9;
    assert_eq!(b.bytes_mut()[100], 9);
    assert!(Mapping::open(&p, 8192).is_err(), "too short");
    let (z, _ex) = Mapping::create_exported("empty", 0).unwrap();
    assert!(z.words().is_empty());
    drop((a, b, z));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_exported_segment_is_shared_through_its_handle_and_has_no_name() {
    let (mut a, ex) = Mapping::create_exported("rr-test-seg", 8192).unwrap();
    assert!(ex.path().starts_with("/proc"), "{}", ex.path().display());
    assert_eq!(std::fs::metadata(ex.path()).unwrap().len(), 8192);
    let mut b = Mapping::open(ex.path(), 8192).unwrap();
    a.words()[5].store(41, Ordering::Release);
    assert_eq!(b.words()[5].load(Ordering::Acquire), 41);
    b.bytes_mut()[8191] = 3;
    assert_eq!(a.bytes_mut()[8191], 3);
    assert!(Mapping::open(ex.path(), 16384).is_err(), "too short");
    drop(ex);
    // The handle is closed: the segment lives on in the mappings.
    a.words()[6].store(42, Ordering::Release);
    assert_eq!(b.words()[6].load(Ordering::Acquire), 42);
    assert!(Mapping::create_exported("bad\0name", 8).is_err());
}

/// A mapping kept for good ([`Mapping::keep_mapped`], after a library's
/// failed wait on it) is never unmapped: its pages stay this process's
/// after the value is dropped, so a late write by the library lands in
/// memory that is still mapped and never reused (unkept, the read below
/// could fault).
#[test]
fn a_kept_mapping_outlives_its_value() {
    let (mut kept, _ex) = Mapping::create_exported("rr-test-kept", 4096).unwrap();
    kept.bytes_mut()[10] = 7;
    let at = kept.bytes_mut().as_mut_ptr();
    kept.keep_mapped();
    drop(kept);
    // SAFETY: the range was mapped and, kept, is never unmapped; nothing
    // else in this test maps or frees it.
    unsafe {
        assert_eq!(*at.add(10), 7);
        *at.add(11) = 8;
        assert_eq!(*at.add(11), 8);
    }
}
