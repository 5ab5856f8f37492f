//! Timelines of real runs on the CPU backend (host timestamps): the JSON is
//! valid trace-event JSON, one slice per plan op part per rank per timed
//! call, waits point from the producer's end to the consumer's start on
//! another track, times follow the plan's order, the SVG names every track,
//! and the backends' traffic counters match the plans.

use super::*;
use ringreduce::algo::AlgoChoice;
use ringreduce::element::ReduceOp;
use ringreduce::engine::{Engine, EngineConfig};
use ringreduce::plan::interp;
use serde_json::Value;

/// Host clocks: one monotonic clock, so only rounding needs room.
const TOL_NS: f64 = 1_000.0;

fn rec(algo: &str, ranks: usize, count: usize, in_place: bool, calls: usize) -> Recording {
    let mut e = Engine::new(EngineConfig::cpu(ranks)).unwrap();
    let o = RecordOptions {
        choice: algo.parse().unwrap(),
        collective: Collective::AllReduce,
        count,
        in_place,
        op: ReduceOp::Sum,
        warmup: 1,
        calls,
        overhead: Some((2, 2)),
        nccl: false,
        isolated: false,
    };
    record::<f32>(&mut e, &o).unwrap_or_else(|err| panic!("{algo} on {ranks}: {err}"))
}

use ringreduce::plan::Collective;

/// Every (path, ranks) the tests run.
fn cases() -> Vec<(&'static str, usize)> {
    let mut v = Vec::new();
    for n in [2, 3, 4] {
        for a in ["ring", "ring:naive", "ring:pipe2", "ps", "oneshot", "auto"] {
            v.push((a, n));
        }
    }
    v.push(("oneshot:flag", 2));
    v.push(("oneshot:fused", 2));
    v
}

/// The number of op parts of a plan, all ranks.
fn parts(plan: &Plan) -> usize {
    plan.ops
        .iter()
        .enumerate()
        .map(|(r, ops)| {
            ops.iter()
                .map(|op| interp::parts(r, op).len())
                .sum::<usize>()
        })
        .sum()
}

/// Waits of a plan whose signal is recorded on another rank or lane.
fn cross_waits(plan: &Plan) -> usize {
    let mut owner = std::collections::HashMap::new();
    for (r, ops) in plan.ops.iter().enumerate() {
        for op in ops {
            for p in interp::parts(r, op) {
                if let Some(s) = p.signal {
                    owner.insert(s, (r, op.lane));
                }
            }
        }
    }
    let mut n = 0;
    for (r, ops) in plan.ops.iter().enumerate() {
        for op in ops {
            for p in interp::parts(r, op) {
                n += p
                    .waits
                    .iter()
                    .filter(|w| owner.get(w).is_some_and(|&o| o != (r, op.lane)))
                    .count();
            }
        }
    }
    n
}

fn num(v: &Value, k: &str) -> f64 {
    v.get(k)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

#[test]
fn one_slice_per_op_part_and_the_plan_order() {
    for (algo, n) in cases() {
        for in_place in [false, true] {
            if in_place && algo == "oneshot:fused" {
                continue; // refuses in place
            }
            let r = rec(algo, n, 4099, in_place, 3);
            let t = &r.timeline;
            assert_eq!(t.calls.len(), 3);
            let slices = t.slices().unwrap();
            let want: usize = t.calls.iter().map(|c| parts(&c.plan)).sum();
            assert_eq!(slices.len(), want, "{algo} {n}");
            let problems = t.check(TOL_NS);
            assert!(problems.is_empty(), "{algo} {n}: {problems:#?}");
            assert!(t.skew_ns() == 0.0 && t.clock().contains("host timestamps"));
            assert!(r.overhead.is_some_and(|o| o.off_us > 0.0 && o.on_us > 0.0));
        }
    }
}

#[test]
fn chrome_json_is_valid_trace_event_json() {
    for (algo, n) in cases() {
        let r = rec(algo, n, 1000, false, 2);
        let t = &r.timeline;
        let text = chrome::to_string(t).unwrap();
        let doc: Value = serde_json::from_str(&text).unwrap();
        let events = doc["traceEvents"].as_array().expect("traceEvents");
        for ev in events {
            for k in ["ph", "pid", "tid"] {
                assert!(ev.get(k).is_some(), "{k} missing in {ev}");
            }
            assert!(ev.get("ts").and_then(Value::as_f64).is_some(), "{ev}");
            assert!(ev["ph"].is_string() && ev["pid"].is_u64() && ev["tid"].is_u64());
        }
        let xs: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
        let want: usize = t.calls.iter().map(|c| parts(&c.plan)).sum();
        assert_eq!(xs.len(), want, "{algo} {n}: one X slice per op part");
        for x in &xs {
            assert!(num(x, "dur") >= 0.0, "{x}");
            assert!(num(x, "ts") >= 0.0, "{x}");
            assert!(x["name"].is_string() && x["args"]["path"].is_string());
        }
        // Every rank and lane in use is named.
        for r in 0..n {
            let named = |name: &str| {
                events
                    .iter()
                    .any(|e| e["ph"] == "M" && e["pid"] == r && e["name"] == name)
            };
            assert!(
                named("process_name") && named("thread_name"),
                "{algo} rank {r}"
            );
        }
        // Flows: pairs s -> f with one id; s at the end of a slice on its
        // track, f at the start of a slice on another track, s before f.
        let flows: Vec<&Value> = events
            .iter()
            .filter(|e| e["ph"] == "s" || e["ph"] == "f")
            .collect();
        let ids: std::collections::BTreeSet<u64> =
            flows.iter().map(|e| e["id"].as_u64().unwrap()).collect();
        assert_eq!(flows.len(), 2 * ids.len(), "{algo} {n}");
        let want: usize = t.calls.iter().map(|c| cross_waits(&c.plan)).sum();
        assert_eq!(
            ids.len(),
            want,
            "{algo} on {n} ranks: one flow per cross-track wait"
        );
        for id in ids {
            let s = flows
                .iter()
                .find(|e| e["id"] == id && e["ph"] == "s")
                .unwrap();
            let f = flows
                .iter()
                .find(|e| e["id"] == id && e["ph"] == "f")
                .unwrap();
            assert_eq!(f["bp"], "e");
            assert!(
                (s["pid"].clone(), s["tid"].clone()) != (f["pid"].clone(), f["tid"].clone()),
                "a wait on its own track: {s} {f}"
            );
            let on = |e: &Value| -> Vec<&&Value> {
                xs.iter()
                    .filter(|x| x["pid"] == e["pid"] && x["tid"] == e["tid"])
                    .collect()
            };
            let (ts, tf) = (num(s, "ts"), num(f, "ts"));
            assert!(
                on(s)
                    .iter()
                    .any(|x| (num(x, "ts") + num(x, "dur") - ts).abs() <= 0.0015),
                "{algo}: flow {id} does not start at the end of a slice: {s}"
            );
            assert!(
                on(f).iter().any(|x| (num(x, "ts") - tf).abs() <= 0.0005),
                "{algo}: flow {id} does not end at the start of a slice: {f}"
            );
            assert!(
                ts <= tf + TOL_NS / 1e3,
                "{algo}: wait {id} ends before it starts"
            );
        }
    }
}

#[test]
fn flows_follow_the_plan() {
    // The flag exchange: each rank's reduce half waits for the peer's push.
    let r = rec("oneshot:flag", 2, 64, true, 1);
    let t = &r.timeline;
    let s = t.slices().unwrap();
    let f = t.flows(&s);
    let flags: Vec<&Flow> = f.iter().filter(|f| f.kind == "flag").collect();
    assert_eq!(flags.len(), 2, "{f:?}");
    for fl in flags {
        let (a, b) = (&s[fl.from], &s[fl.to]);
        assert_ne!(a.rank, b.rank);
        assert_eq!(
            (a.kind, a.part, b.kind, b.part),
            ("exchange", 0, "exchange", 1)
        );
        assert!(a.end_ns <= b.start_ns + TOL_NS);
    }
    // The ring: every consumer is on another rank or lane than its producer.
    let r = rec("ring:pipe2", 4, 4096, false, 1);
    let t = &r.timeline;
    let s = t.slices().unwrap();
    let f = t.flows(&s);
    assert!(!f.is_empty());
    for fl in &f {
        let (a, b) = (&s[fl.from], &s[fl.to]);
        assert!((a.rank, a.track) != (b.rank, b.track));
        assert!(a.end_ns <= b.start_ns + TOL_NS, "{a:?} -> {b:?}");
    }
}

#[test]
fn svg_names_every_rank_and_lane() {
    for (algo, n) in [("ring:pipe2", 3), ("ps", 4), ("oneshot:flag", 2)] {
        let r = rec(algo, n, 2048, false, 2);
        let svg = svg::to_svg(&r.timeline).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        let slices = r.timeline.slices().unwrap();
        for s in &slices {
            let label = format!("rank {} {}", s.rank, track_name(s.track));
            assert!(svg.contains(&label), "{algo}: {label} missing");
        }
        assert!(svg.contains("time (µs"), "axis");
        assert!(svg.contains("host timestamps"), "clock named");
        assert!(svg.contains("measurement overhead"), "overhead note");
        // Balanced: every opened element is closed.
        let opens = svg.matches("<rect").count() + svg.matches("<text").count();
        let closes = svg.matches("</rect>").count()
            + svg.matches("/>").count()
            + svg.matches("</text>").count();
        assert!(closes >= opens, "{algo}");
        let p = std::env::temp_dir().join(format!("rr_timeline_{}_{n}.svg", std::process::id()));
        crate::report::write_output("--svg", &p, svg.as_bytes()).unwrap();
        assert!(std::fs::read_to_string(&p).unwrap().contains("rank 0"));
        let _ = std::fs::remove_file(&p);
    }
}

#[test]
fn breakdown_adds_up() {
    for (algo, n) in [("ring:pipe2", 4), ("ps", 3), ("oneshot:flag", 2)] {
        let r = rec(algo, n, 100_000, false, 3);
        let b = r.timeline.breakdown().unwrap();
        assert_eq!(b.len(), 3);
        for c in &b {
            assert_eq!(c.ranks.len(), n);
            for s in &c.ranks {
                let sum = s.issue_ns + s.wait_ns + s.copy_ns + s.reduce_ns + s.rest_ns;
                assert!((sum - s.wall_ns).abs() < 1.0, "{algo}: {s:?}");
                assert!(s.wall_ns > 0.0 && s.issue_ns >= 0.0 && s.wait_ns >= 0.0);
            }
            assert!(
                c.ranks.iter().any(|s| s.copy_ns + s.reduce_ns > 0.0),
                "{algo}: work"
            );
        }
    }
}

#[test]
fn table_lists_every_op_of_the_call() {
    let r = rec("ring", 3, 3000, false, 2);
    let t = &r.timeline;
    let text = t.table(1).unwrap();
    let want = parts(&t.calls[1].plan);
    assert_eq!(text.lines().count(), want + 1, "{text}");
    assert!(text.contains("reduce-scatter") && text.contains("all-gather"));
    assert_eq!(t.spans().len(), 2);
}

/// The traffic counters of the CPU backend equal the plan's traffic, for
/// the ring and the parameter server, with more ranks than cores too.
#[test]
fn traffic_counters_match_the_plans() {
    for algo in ["ring", "ps", "ring:pipe2"] {
        for n in [2, 4, 8, 16] {
            let choice: AlgoChoice = algo.parse().unwrap();
            let mut e = Engine::new(EngineConfig::cpu(n)).unwrap();
            let count = 10_007;
            let inputs = vec![vec![1.0f32; count]; n];
            let shape = e.load(Collective::AllReduce, &inputs, false).unwrap();
            e.take_traffic().unwrap();
            let mut plans = Vec::new();
            for _ in 0..3 {
                plans.push(e.launch(Some(&choice), &shape, ReduceOp::Sum).unwrap());
            }
            e.synchronize().unwrap();
            let counted = e.take_traffic().unwrap();
            let mut want = vec![Traffic::default(); n];
            for p in &plans {
                for (w, t) in want.iter_mut().zip(p.traffic()) {
                    w.sent += t.sent;
                    w.received += t.received;
                }
            }
            assert_eq!(counted, want, "{algo} on {n} ranks");
            assert!(e.take_traffic().unwrap().iter().all(|t| t.sent == 0));
        }
    }
}

use ringreduce::plan::Traffic;

#[test]
fn helpers() {
    assert_eq!(svg::tick_step(100.0, 10.0), 10.0);
    assert_eq!(svg::tick_step(37.0, 12.0), 2.0);
    assert_eq!(svg::tick_step(0.0, 12.0), 1.0);
    let w = svg::wrap("aa bb cc dd ee ff", 5);
    assert_eq!(w[0], "aa bb");
    assert!(w[1..].iter().all(|l| l.starts_with("    ")), "{w:?}");
    assert_eq!(w.join(" ").split_whitespace().count(), 6);
    assert_eq!(svg::esc("<a&\"b\">"), "&lt;a&amp;&quot;b&quot;&gt;");
}

#[test]
fn the_timing_source_is_the_first_clause_of_a_cuda_clock_and_absent_on_the_cpu() {
    let mut r = rec("ring", 2, 1000, false, 1);
    assert_eq!(r.timeline.timing_source(), None);
    let c = &mut r.timeline.calls[0].times;
    c.clock =
        "timing source: CUDA events (CUPTI: off (RINGREDUCE_CUPTI=0)); GPU event timestamps".into();
    assert_eq!(
        r.timeline.timing_source().as_deref(),
        Some("timing source: CUDA events (CUPTI: off (RINGREDUCE_CUPTI=0))")
    );
}

/// NCCL's call, recorded milliseconds after the ring's, is drawn on the same
/// scale beside the ring's last call instead of far to its right.
#[test]
fn svg_draws_nccls_call_beside_the_ring() {
    let mut r = rec("ring", 2, 2048, false, 2);
    let t = &mut r.timeline;
    let ring_end = t
        .calls
        .iter()
        .flat_map(|c| c.times.ops.iter().map(|o| o.end_ns))
        .fold(0.0, f64::max);
    let later = ring_end + 25e6;
    t.nccl.push(ringreduce::backend::CallTimeline {
        plan: "nccl".into(),
        clock: t.calls[0].times.clock.clone(),
        launch_ns: later - 1e3,
        skew_ns: 0.0,
        ops: (0..2)
            .map(|rank| ringreduce::backend::OpTime {
                rank,
                op: 0,
                part: 0,
                start_ns: later,
                end_ns: later + 40e3,
            })
            .collect(),
    });
    let mut slices = t.slices().unwrap();
    let last_start = slices
        .iter()
        .filter(|s| !s.nccl && s.call == 1)
        .map(|s| s.start_ns)
        .fold(f64::INFINITY, f64::min);
    let (shift, call) = svg::align_nccl(&mut slices).expect("NCCL came later: shifted");
    assert_eq!(call, 2);
    assert!(shift > 24e6, "{shift}");
    for s in slices.iter().filter(|s| s.nccl) {
        assert!((s.start_ns - last_start).abs() < 1.0, "{s:?}");
        assert!(
            (s.end_ns - s.start_ns - 40e3).abs() < 1.0,
            "same scale: {s:?}"
        );
    }
    let svg = svg::to_svg(t).unwrap();
    assert!(svg.contains("NCCL rank 1"), "NCCL's rows drawn");
    assert!(svg.contains("NCCL&apos;s call ran 2"), "the shift is said");
    // The axis spans the ring's calls, not the 25 ms gap.
    let ticks: Vec<f64> = svg
        .split("</text>")
        .filter_map(|t| t.rsplit('>').next()?.trim().parse().ok())
        .collect();
    assert!(!ticks.is_empty(), "tick labels");
    let top = ticks.iter().copied().fold(0.0, f64::max);
    assert!(top < 20_000.0, "the axis reaches {top} us");
}

/// The copies between nodes of a plan built for nodes (`hier:2`: ranks 0-1
/// and 2-3) have a track of their own, drawn and exported as `network`;
/// every other slice stays on the lane that issued it, and in-lane order
/// is still checked on the issuing lane. A plan without nodes has none.
#[test]
fn copies_between_nodes_are_drawn_on_the_network_track() {
    let r = rec("hier:2", 4, 4096, false, 2);
    let slices = r.timeline.slices().unwrap();
    let net: Vec<&Slice> = slices.iter().filter(|s| s.track == NETWORK_TRACK).collect();
    assert!(!net.is_empty(), "hier:2 crosses nodes");
    for s in &slices {
        let crosses = s.category == Category::Copy && s.peer.is_some_and(|p| p / 2 != s.rank / 2);
        assert_eq!(
            s.track == NETWORK_TRACK,
            crosses,
            "{}: rank {} peer {:?}",
            s.name,
            s.rank,
            s.peer
        );
        assert!(s.lane < LANES, "{}", s.name);
    }
    // Rank by rank, the network track carries what the plan sends between
    // nodes, 2(K-1)/K x D/G: with K = 2 nodes, G = 2 and D = 4096 floats,
    // 4096 bytes per rank per call.
    let plan = &r.timeline.calls[0].plan;
    for (rank, t) in plan.node_traffic(2).iter().enumerate() {
        let sent: u64 = net
            .iter()
            .filter(|s| s.call == 0 && s.rank == rank)
            .map(|s| s.bytes)
            .sum();
        assert_eq!((sent, t.sent), (8192, 8192), "rank {rank}");
    }
    let issues = r.timeline.check(TOL_NS);
    assert!(issues.is_empty(), "{issues:?}");
    let svg = svg::to_svg(&r.timeline).unwrap();
    assert!(svg.contains("rank 0 network"), "the network row is drawn");
    let json = chrome::to_json(&r.timeline).unwrap().to_string();
    assert!(json.contains("\"network\""), "the network track is named");
    let ring = rec("ring", 4, 4096, false, 1);
    assert!(ring
        .timeline
        .slices()
        .unwrap()
        .iter()
        .all(|s| s.track != NETWORK_TRACK));
}
