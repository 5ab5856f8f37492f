use super::*;

fn span(addr: usize, bytes: usize) -> HostSpan {
    HostSpan { addr, bytes }
}

#[test]
fn check_refuses_null_wrapping_and_overlapping_buffers() {
    let msg = |s: &[HostSpan], r: &[HostSpan]| check(s, r).unwrap_err().to_string();
    assert!(msg(&[span(0, 4)], &[]).contains("null address"));
    assert!(msg(&[], &[span(usize::MAX - 2, 4)]).contains("wraps"));
    assert!(msg(&[], &[span(64, 16), span(72, 16)]).contains("share memory"));
    assert!(msg(&[span(64, 16)], &[span(72, 16)]).contains("overlaps the input"));
    // Empty buffers overlap nothing, and may be null.
    check(&[span(0, 0)], &[span(64, 0), span(64, 16)]).unwrap();
    check(&[span(64, 8)], &[span(72, 8)]).unwrap();
}

#[test]
fn host_slices_gives_the_described_memory() {
    let input = [1u8, 2, 3, 4];
    let mut output = [0u8; 4];
    let s = [span(input.as_ptr() as usize, 4)];
    let r = [span(output.as_mut_ptr() as usize, 4)];
    // SAFETY: both arrays live to the end of the test and nothing else
    // touches them while the slices are used.
    let (send, mut recv) = unsafe { host_slices(&s, &r) }.unwrap();
    assert_eq!(send[0], &[1, 2, 3, 4]);
    recv[0].copy_from_slice(send[0]);
    drop((send, recv));
    assert_eq!(output, input);
    // SAFETY: the call is refused before any slice is made.
    assert!(unsafe { host_slices(&[span(0, 4)], &[]) }.is_err());
}
