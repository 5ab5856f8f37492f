use super::*;

#[test]
fn ring_link_load_counts_the_busiest_direction() {
    assert_eq!(ring_link_load(&[]), 0);
    assert_eq!(ring_link_load(&[0]), 0);
    assert_eq!(ring_link_load(&[0, 0, 0]), 0);
    assert_eq!(ring_link_load(&[0, 1]), 1);
    assert_eq!(ring_link_load(&[0, 1, 2, 3]), 1);
    // Round-robin on 2 GPUs: every hop crosses, N/2 per direction.
    assert_eq!(ring_link_load(&[0, 1, 0, 1]), 2);
    assert_eq!(ring_link_load(&[0, 1, 0, 1, 0, 1, 0, 1]), 4);
    // Blocks: one hop each way.
    assert_eq!(ring_link_load(&[0, 0, 1, 1]), 1);
    assert_eq!(ring_link_load(&[0, 0, 0, 0, 1, 1, 1, 1]), 1);
    // Odd rank counts on 2 GPUs, round-robin: (N-1)/2 hops one way.
    assert_eq!(ring_link_load(&[0, 1, 0]), 1);
    assert_eq!(ring_link_load(&[0, 1, 0, 1, 0]), 2);
}

/// Exact terms of every cost at N = 4, D = 8 MB.
#[test]
fn cost_terms() {
    let d = 8e6;
    let t = |c: Cost| {
        let x = c.terms(4, d);
        (x.rounds, x.link_bytes, x.reduce_bytes)
    };
    assert_eq!(t(Cost::Ring { slices: 1 }), (6.0, 12e6, 6e6));
    // Slicing: the link carries the same bytes, each slice is a
    // hand-off, one slice's reduce per step is exposed.
    assert_eq!(t(Cost::Ring { slices: 2 }), (12.0, 12e6, 3e6));
    assert_eq!(t(Cost::Ring { slices: 0 }), t(Cost::Ring { slices: 1 }));
    assert_eq!(t(Cost::ParameterServer), (2.0, 48e6, 24e6));
    assert_eq!(t(Cost::OneShot), (1.0, 24e6, 24e6));
    // 2 nodes x 2: a ring of 2 on D, then a ring of 2 on D/2; the
    // one-node and one-rank-per-node limits are the ring.
    assert_eq!(t(Cost::Hier { per_node: 2 }), (4.0, 12e6, 6e6));
    assert_eq!(t(Cost::Hier { per_node: 4 }), t(Cost::Ring { slices: 1 }));
    assert_eq!(t(Cost::Hier { per_node: 1 }), t(Cost::Ring { slices: 1 }));
    for c in [
        Cost::Ring { slices: 3 },
        Cost::ParameterServer,
        Cost::OneShot,
        Cost::Hier { per_node: 2 },
    ] {
        assert_eq!(c.terms(1, d).rounds, 0.0);
        assert_eq!(c.terms(0, d).link_bytes, 0.0);
    }
}
