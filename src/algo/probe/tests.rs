use super::*;

#[test]
fn probes_validate() {
    for n in 1..5 {
        for count in [0, 1, 7, 1000] {
            for streams in 1..=2 {
                let p = peer_copy(n, count, 4, streams);
                p.validate().unwrap_or_else(|e| panic!("{n} {count}: {e}"));
            }
            for (pair, streams) in [(0, 1), (0, 2), (3, 1), (1, 1), (0, 4)]
                .into_iter()
                .zip(1..)
            {
                let streams = 1 + streams % 2;
                let p = peer_copy_pair(n, count, 4, streams, pair);
                p.validate()
                    .unwrap_or_else(|e| panic!("{n} {count} {pair:?}: {e}"));
                let t = p.traffic();
                let valid = pair.0 != pair.1 && pair.0 < n && pair.1 < n;
                for (r, x) in t.iter().enumerate() {
                    let moves = valid && (r == pair.0 || r == pair.1);
                    let want = if moves { 4 * count as u64 } else { 0 };
                    assert_eq!((x.sent, x.received), (want, want), "{n} {pair:?} rank {r}");
                }
            }
            for (from, to) in [(0, 1), (1, 0), (0, 0), (2, 3)] {
                let p = peer_copy_one_way(n, count, 4, from, to);
                p.validate()
                    .unwrap_or_else(|e| panic!("{n} {count} {from}->{to}: {e}"));
                let t = p.traffic();
                if from != to && from < n && to < n {
                    assert_eq!(t[from].sent, 4 * count as u64);
                    assert_eq!(t[to].received, 4 * count as u64);
                    assert_eq!(t[to].sent, 0);
                } else {
                    assert!(t.iter().all(|x| x.sent == 0));
                }
            }
        }
    }
}
