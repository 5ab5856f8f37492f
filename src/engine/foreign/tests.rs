use super::*;

const AR: Collective = Collective::AllReduce;
const RS: Collective = Collective::ReduceScatter;
const AG: Collective = Collective::AllGather;

#[test]
fn the_count_follows_nccls_convention_in_and_out_of_place() {
    assert_eq!(count_of(AR, 2, 4, &[40, 40], &[40, 40]).unwrap(), 10);
    assert_eq!(count_of(AR, 2, 4, &[], &[40, 40]).unwrap(), 10);
    assert_eq!(count_of(RS, 2, 4, &[80, 80], &[40, 40]).unwrap(), 10);
    assert_eq!(count_of(RS, 4, 2, &[], &[80; 4]).unwrap(), 10);
    assert_eq!(count_of(AG, 2, 4, &[40, 40], &[80, 80]).unwrap(), 10);
    assert_eq!(count_of(AG, 2, 4, &[], &[80, 80]).unwrap(), 10);
    let b = Collective::Broadcast { root: 1 };
    assert_eq!(count_of(b, 3, 8, &[8; 3], &[8; 3]).unwrap(), 1);
    assert_eq!(count_of(AR, 2, 4, &[], &[0, 0]).unwrap(), 0);
}

#[test]
fn outputs_sharing_memory_are_refused() {
    let sp = DeviceSpan::unchecked_for_tests;
    let msg = |s: &[DeviceSpan], r: &[DeviceSpan]| disjoint(s, r).unwrap_err().to_string();
    assert!(msg(&[], &[sp(0x1000, 64, 0), sp(0x1020, 64, 0)]).contains("share memory"));
    assert!(msg(&[sp(0x1000, 64, 0)], &[sp(0x1030, 64, 0)]).contains("overlaps the input"));
    // Adjacent, empty, or on another GPU: no overlap.
    disjoint(
        &[sp(0x1000, 64, 0)],
        &[sp(0x1040, 64, 0), sp(0x1080, 64, 0)],
    )
    .unwrap();
    disjoint(&[], &[sp(0x1000, 0, 0), sp(0x1000, 64, 0)]).unwrap();
    disjoint(&[], &[sp(0x1000, 64, 0), sp(0x1000, 64, 1)]).unwrap();
}

#[test]
fn wrong_counts_sizes_and_lengths_are_refused_by_name() {
    let msg = |r: Result<usize>| r.unwrap_err().to_string();
    assert!(matches!(
        count_of(AR, 2, 4, &[], &[40]),
        Err(Error::WrongBufferCount {
            ranks: 2,
            buffers: 1
        })
    ));
    assert!(matches!(
        count_of(AR, 2, 4, &[40, 40, 40], &[40, 40]),
        Err(Error::WrongBufferCount {
            ranks: 2,
            buffers: 3
        })
    ));
    assert!(msg(count_of(AR, 2, 4, &[40, 36], &[40, 40])).contains("rank 1"));
    assert!(msg(count_of(AR, 2, 4, &[], &[42, 42])).contains("whole number"));
    assert!(msg(count_of(AR, 2, 4, &[40, 40], &[44, 44])).contains("expected 10"));
    assert!(msg(count_of(RS, 2, 4, &[40, 40], &[40, 40])).contains("expected 20"));
    assert!(msg(count_of(RS, 3, 4, &[], &[40; 3])).contains("3 equal slices"));
    assert!(msg(count_of(AG, 2, 4, &[40, 40], &[40, 40])).contains("expected 20"));
}
