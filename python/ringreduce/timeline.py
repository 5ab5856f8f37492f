"""Timelines of real calls, for notebooks: every op of every rank of the
calls made with timing on, written as Chrome trace-event JSON (open it in
https://ui.perfetto.dev or ``chrome://tracing``), the format of
``ringreduce trace --timeline``.

    e = ringreduce.Engine(backend="cpu", ranks=4)
    e.set_timing(True)
    e.all_reduce(arrays)            # the calls to look at
    e.set_timing(False)
    calls = e.timeline("ring.json") # and the same as Python objects

One process track per rank, one thread track per lane (compute, copy); each
op part is a slice named like the trace's cells (``copy RS1 c3.0``: kind,
phase and step, chunk and slice) with its plan fields in ``args``.
"""

import json

_PHASE = {"ReduceScatter": "RS", "AllGather": "AG"}
_LANES = {"compute": 0, "copy": 1}


def _name(op):
    phase = _PHASE.get(op.get("phase") or "", "")
    if phase:
        return f"{op['kind']} {phase}{op['step']} c{op['chunk']}.{op['slice']}"
    note = op.get("note") or ""
    return f"{op['kind']} ({note})" if note and note != op["kind"] else op["kind"]


def trace_events(calls):
    """The Chrome trace events of ``calls`` (what ``Engine.timeline``
    returns): metadata naming the tracks, then one complete event (``X``)
    per op part, times in microseconds from the earliest start."""
    starts = [t[3] for c in calls for t in c["times"]]
    zero = min(starts) if starts else 0.0
    events, tracks = [], set()
    for k, c in enumerate(calls):
        plan = c["plan"]
        ops = {(o["rank"], o["index"]): o for o in plan["ops"]}
        for rank, index, part, start, end in c["times"]:
            op = ops[(rank, index)]
            tid = _LANES.get(op["lane"], 0)
            tracks.add((rank, tid, op["lane"]))
            events.append({
                "name": _name(op), "ph": "X", "pid": rank, "tid": tid,
                "ts": (start - zero) / 1e3, "dur": max(end - start, 0.0) / 1e3,
                "args": {"call": k, "path": plan["name"], "op": index, "part": part,
                         "kind": op["kind"], "phase": op["phase"], "step": op["step"],
                         "chunk": op["chunk"], "slice": op["slice"], "clock": c["clock"]},
            })
    meta = []
    for rank in sorted({r for r, _, _ in tracks}):
        meta.append({"name": "process_name", "ph": "M", "pid": rank, "args": {"name": f"rank {rank}"}})
    for rank, tid, lane in sorted(tracks):
        meta.append({"name": "thread_name", "ph": "M", "pid": rank, "tid": tid, "args": {"name": f"{lane} lane"}})
    return meta + events


def dump(calls, f):
    """Write ``calls`` to the open text file ``f`` as Chrome trace-event JSON."""
    clock = calls[0]["clock"] if calls else ""
    json.dump({"traceEvents": trace_events(calls), "displayTimeUnit": "ns",
               "otherData": {"source": "ringreduce", "clock": clock,
                             "calls": [c["plan"]["name"] for c in calls]}}, f)


def write(calls, path):
    """Write ``calls`` to ``path`` as Chrome trace-event JSON."""
    with open(path, "w") as f:
        dump(calls, f)
