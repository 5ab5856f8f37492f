use super::*;

fn check_layout(count: usize, n: usize, elem: usize) {
    let l = ChunkLayout::new(count, n, elem);
    assert_eq!(l.chunks(), n);
    // Disjoint, in order, covering 0..count.
    let mut at = 0;
    for c in 0..n {
        let r = l.range(c);
        assert_eq!(r.start, at, "count={count} n={n} chunk {c}");
        assert!(r.end >= r.start);
        at = r.end;
    }
    assert_eq!(at, count);
    let unit = 16 / elem;
    if count / unit >= n {
        // Aligned inner boundaries, sizes differ by at most one unit plus the tail.
        for c in 1..n {
            assert_eq!(l.range(c).start % unit, 0, "count={count} n={n}");
        }
        let lens: Vec<usize> = (0..n).map(|c| l.len(c)).collect();
        let min = *lens.iter().min().unwrap();
        let max = *lens.iter().max().unwrap();
        assert!(max - min < 2 * unit, "{lens:?}");
        // Remainder on the first chunks: lengths (without the tail) do not increase.
        for c in 1..n - 1 {
            assert!(lens[c] <= lens[c - 1]);
        }
    } else {
        let lens: Vec<usize> = (0..n).map(|c| l.len(c)).collect();
        for c in 1..n {
            assert!(lens[c] <= lens[c - 1]);
            assert!(lens[0] - lens[c] <= 1);
        }
    }
}

/// An LL slot on a device is its elements as whole lines of 8 data
/// bytes, each line 16 bytes: the largest chunk's bytes rounded up to
/// 8, twice (the kernel's and the launch check's formula), for every
/// element size the engine has (1, 2, 4 and 8 bytes).
#[test]
fn ll_slots_are_whole_lines_twice_their_data() {
    for elem in [1, 2, 4, 8] {
        for n in 1..6 {
            for count in [0, 1, 3, 7, 17, 1000, 4099] {
                let max = ChunkLayout::new(count, n, elem).max_len();
                let len = ll_slot_len(count, n, elem);
                assert_eq!(
                    len * elem,
                    (max * elem).div_ceil(8) * 8,
                    "{elem} {n} {count}"
                );
                assert_eq!(ll_slot_bytes(count, n, elem), 2 * len * elem);
            }
        }
    }
}

#[test]
fn layout_exhaustive_small() {
    for n in 1..=9 {
        for count in 0..=300 {
            check_layout(count, n, 4);
            check_layout(count, n, 2);
            check_layout(count, n, 8);
        }
    }
}

#[test]
fn layout_random_large() {
    // A fixed xorshift so the test is repeatable without extra crates.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let count = (x % (1 << 30)) as usize;
        let n = (x >> 40) as usize % 64 + 1;
        check_layout(count, n, 4);
    }
}

#[test]
fn slices_cover_and_align() {
    for len in 0..200 {
        for pieces in 1..6 {
            let s = slices(100..100 + len, pieces, 4);
            let mut at = 100;
            for r in &s {
                assert_eq!(r.start, at);
                assert!(!r.is_empty());
                at = r.end;
            }
            assert_eq!(at, 100 + len);
            assert!(s.len() <= pieces);
        }
    }
}

#[test]
fn send_matches_neighbour_receive() {
    for n in 1..=9 {
        for s in 0..steps(n) {
            for phase in [Phase::ReduceScatter, Phase::AllGather] {
                for r in 0..n {
                    assert_eq!(
                        recv_chunk(phase, right(r, n), s, n),
                        send_chunk(phase, r, s, n)
                    );
                }
            }
        }
    }
}

/// Simulate the schedule symbolically: each rank's copy of each chunk is the
/// set (as a count per source rank) of inputs it has summed. At the end every
/// rank must hold, for every chunk, every input exactly once.
fn simulate(n: usize) -> Vec<Vec<Vec<u32>>> {
    // held[r][c][src] = how many times input `src` is in rank r's chunk c.
    let mut held: Vec<Vec<Vec<u32>>> = (0..n)
        .map(|r| {
            (0..n)
                .map(|_| (0..n).map(|s| u32::from(s == r)).collect())
                .collect()
        })
        .collect();
    for s in 0..steps(n) {
        // All ranks send simultaneously: snapshot what is sent first.
        let sent: Vec<(usize, Vec<u32>)> = (0..n)
            .map(|r| {
                let c = send_chunk(Phase::ReduceScatter, r, s, n);
                (c, held[r][c].clone())
            })
            .collect();
        for r in 0..n {
            let (c, v) = &sent[left(r, n)];
            assert_eq!(*c, recv_chunk(Phase::ReduceScatter, r, s, n));
            for (dst, add) in held[r][*c].iter_mut().zip(v) {
                *dst += add;
            }
        }
    }
    for r in 0..n {
        assert!(
            held[r][owned_chunk(r, n)].iter().all(|&k| k == 1),
            "n={n} rank {r} owns an incomplete chunk"
        );
    }
    for s in 0..steps(n) {
        let sent: Vec<(usize, Vec<u32>)> = (0..n)
            .map(|r| {
                let c = send_chunk(Phase::AllGather, r, s, n);
                (c, held[r][c].clone())
            })
            .collect();
        for r in 0..n {
            let (c, v) = &sent[left(r, n)];
            assert!(v.iter().all(|&k| k == 1), "all-gather sends a partial sum");
            held[r][*c] = v.clone();
        }
    }
    held
}

#[test]
fn every_input_reduced_exactly_once() {
    for n in 1..=9 {
        let held = simulate(n);
        for (r, chunks) in held.iter().enumerate() {
            for (c, sums) in chunks.iter().enumerate() {
                assert!(sums.iter().all(|&k| k == 1), "n={n} r={r} c={c}: {sums:?}");
            }
        }
    }
}

#[test]
fn rs_forwards_what_it_reduced() {
    for n in 2..=9 {
        for r in 0..n {
            for s in 0..steps(n) - 1 {
                assert_eq!(
                    send_chunk(Phase::ReduceScatter, r, s + 1, n),
                    recv_chunk(Phase::ReduceScatter, r, s, n)
                );
            }
            assert_eq!(
                send_chunk(Phase::AllGather, r, 0, n),
                owned_chunk(r, n),
                "all-gather starts with the owned chunk"
            );
        }
    }
}

#[test]
fn rotated_ring_owns_its_own_chunk() {
    for n in 1..=9 {
        let ring = Ring::own_chunk(n);
        for r in 0..n {
            assert_eq!(ring.owned_chunk(r), r);
            if n > 1 {
                assert_eq!(ring.send_chunk(Phase::AllGather, r, 0), r);
                assert_eq!(
                    ring.recv_chunk(Phase::ReduceScatter, r, ring.steps() - 1),
                    r
                );
            }
            for s in 0..ring.steps() {
                for phase in [Phase::ReduceScatter, Phase::AllGather] {
                    assert_eq!(
                        ring.recv_chunk(phase, ring.right(r), s),
                        ring.send_chunk(phase, r, s)
                    );
                }
            }
        }
        let plain = Ring::all_reduce(n);
        for r in 0..n {
            assert_eq!(plain.owned_chunk(r), owned_chunk(r, n));
        }
    }
}

#[test]
fn uniform_layout() {
    for n in 1..=9 {
        for chunk in 0..20 {
            let l = ChunkLayout::uniform(chunk, n);
            assert_eq!(l.chunks(), n);
            assert_eq!(l.count(), n * chunk);
            for c in 0..n {
                assert_eq!(l.range(c), c * chunk..(c + 1) * chunk);
            }
        }
    }
}

#[test]
fn traffic_matches_formula() {
    for n in 1..=9 {
        for count in 0..=300 {
            let l = ChunkLayout::new(count, n, 4);
            let total: usize = (0..n).map(|r| ring_bytes_per_rank(&l, r, 4)).sum();
            // Summed over ranks the exact count equals the formula exactly.
            let f = ring_bytes_formula(n, count * 4) * n as f64;
            assert!((total as f64 - f).abs() < 1e-6, "n={n} count={count}");
        }
    }
    let l = ChunkLayout::new(1 << 20, 4, 4);
    assert_eq!(
        ring_bytes_per_rank(&l, 0, 4) as f64,
        ring_bytes_formula(4, 4 << 20)
    );
}
