use super::step_spans;

/// A ring of 2 steps: its start at 100, step 0's put done at 110, step 0
/// at 150, step 1 at 190, the op's end event at 1000 (host ns): the
/// spans end at 1000 and keep the kernel's own intervals; step 1's put
/// runs beside step 0's receive.
#[test]
fn step_times_become_part_spans_anchored_at_the_ops_end() {
    let v = step_spans(&[100, 110, 150, 190], 1000.0).unwrap();
    assert_eq!(
        v,
        vec![
            (910.0, 920.0),
            (920.0, 960.0),
            (920.0, 960.0),
            (960.0, 1000.0)
        ]
    );
    // The one-shot: one step.
    let v = step_spans(&[5, 7, 12], 50.0).unwrap();
    assert_eq!(v, vec![(43.0, 45.0), (45.0, 50.0)]);
    // A kernel that gave up (a word never written) or no words at all.
    assert_eq!(step_spans(&[5, 7, 0], 50.0), None);
    assert_eq!(step_spans(&[5, 9, 7], 50.0), None);
    assert_eq!(step_spans(&[5], 50.0), None);
}
