//! Chrome trace-event JSON (opens in Perfetto and chrome://tracing).
//!
//! * one process per rank (`pid` = rank), one thread per lane (`tid` = the
//!   lane's index, named `compute` / `copy` through `M` metadata events) and
//!   `tid` [`NCCL_TRACK`] for NCCL's call;
//! * one complete event (`ph: "X"`) per op part, `ts`/`dur` in microseconds
//!   from the earliest start, `args` with the phase, step, chunk, slice,
//!   bytes, GB/s, op kind and path;
//! * one flow (`ph: "s"` at the end of the op that records a signal, `ph:
//!   "f"` with `bp: "e"` at the start of the op that waits for it) per wait
//!   across ranks or lanes.

use super::{track_name, Category, Timeline, NCCL_TRACK};
use ringreduce::backend::BackendKind;
use serde_json::{json, Value};

/// Microseconds from nanoseconds, rounded to the nanosecond.
fn us(ns: f64) -> f64 {
    (ns).round() / 1e3
}

/// The trace-event document of `t`.
pub fn to_json(t: &Timeline) -> Result<Value, String> {
    let slices = t.slices()?;
    let flows = t.flows(&slices);
    let mut ev: Vec<Value> = Vec::new();
    let ranks = t.ranks();
    let clock_kind = match t.kind {
        BackendKind::Cuda => "GPU timestamps",
        BackendKind::Cpu => "host timestamps",
    };
    for r in 0..ranks {
        let name = match t.kind {
            BackendKind::Cuda => format!(
                "rank {r} (GPU {})",
                t.rank_to_device.get(r).copied().unwrap_or(0)
            ),
            BackendKind::Cpu => format!("rank {r} (CPU thread, host timestamps)"),
        };
        ev.push(
            json!({"name": "process_name", "ph": "M", "ts": 0, "pid": r, "tid": 0,
            "args": {"name": name}}),
        );
        ev.push(
            json!({"name": "process_sort_index", "ph": "M", "ts": 0, "pid": r, "tid": 0,
            "args": {"sort_index": r}}),
        );
        let mut tracks: Vec<usize> = slices
            .iter()
            .filter(|s| s.rank == r)
            .map(|s| s.track)
            .collect();
        tracks.sort_unstable();
        tracks.dedup();
        for tr in tracks {
            let name = match (tr, t.kind) {
                (NCCL_TRACK, _) => "nccl (compute stream)".to_string(),
                (_, BackendKind::Cuda) => format!("{} stream", track_name(tr)),
                (_, BackendKind::Cpu) => format!("{} lane", track_name(tr)),
            };
            ev.push(
                json!({"name": "thread_name", "ph": "M", "ts": 0, "pid": r, "tid": tr,
                "args": {"name": name}}),
            );
            ev.push(
                json!({"name": "thread_sort_index", "ph": "M", "ts": 0, "pid": r, "tid": tr,
                "args": {"sort_index": tr}}),
            );
        }
    }
    for s in &slices {
        let mut args = json!({
            "op kind": s.kind,
            "path": s.path,
            "call": s.call + 1,
            "rank": s.rank,
            "lane": track_name(s.track),
            "clock": clock_kind,
        });
        if !s.nccl {
            args["op"] = json!(s.op);
            args["part"] = json!(s.part);
            args["bytes"] = json!(s.bytes);
            if let Some(p) = s.phase {
                args["phase"] = json!(p.label());
                args["step"] = json!(s.step);
                args["chunk"] = json!(s.chunk);
                args["slice"] = json!(s.slice);
            }
            if !s.note.is_empty() {
                args["note"] = json!(s.note);
            }
            if let Some(g) = s.gbps() {
                args["GB/s"] = json!((g * 100.0).round() / 100.0);
            }
            if let Some(p) = s.peer {
                args["peer rank"] = json!(p);
            }
        }
        let cat = match s.category {
            Category::Copy => "copy",
            Category::Reduce => "reduce",
            Category::Marker => "marker",
            Category::Nccl => "nccl",
        };
        ev.push(json!({
            "name": s.name,
            "cat": cat,
            "ph": "X",
            "ts": us(s.start_ns),
            "dur": us(s.dur_ns().max(0.0)),
            "pid": s.rank,
            "tid": s.track,
            "args": args,
        }));
    }
    for (id, f) in flows.iter().enumerate() {
        let (a, b) = (&slices[f.from], &slices[f.to]);
        let name = format!("wait ({} {})", f.kind, f.signal);
        // Just inside the producer's slice, so viewers bind the arrow to it.
        let from_ts = us((a.end_ns - 1.0).max(a.start_ns));
        ev.push(json!({"name": name, "cat": "wait", "ph": "s", "id": id,
            "ts": from_ts, "pid": a.rank, "tid": a.track}));
        ev.push(
            json!({"name": name, "cat": "wait", "ph": "f", "bp": "e", "id": id,
            "ts": us(b.start_ns), "pid": b.rank, "tid": b.track}),
        );
    }
    Ok(json!({
        "traceEvents": ev,
        "displayTimeUnit": "ns",
        "otherData": {
            "tool": "ringreduce trace",
            "what": t.what,
            "backend": t.backend,
            "clock": t.clock(),
            "clock skew between ranks (us)": t.skew_ns() / 1e3,
            "time zero": "the earliest op start",
            "notes": t.notes,
        }
    }))
}

/// The document as text.
pub fn to_string(t: &Timeline) -> Result<String, String> {
    serde_json::to_string(&to_json(t)?).map_err(|e| e.to_string())
}
