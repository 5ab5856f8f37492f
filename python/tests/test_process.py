"""One process per rank (Engine.job) on the CPU backend: the store, the
calls, and the faults: a rank that raises mid-collective, a killed rank,
ranks that disagree on the world size or the call."""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

import ringreduce as rr

pytest.importorskip("numpy", reason="SKIPPED: numpy is not installed")

WORKER = textwrap.dedent(
    """
    import os, sys, numpy as np, ringreduce as rr
    rank, size, store, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]

    class FileKV:
        # A key-value store of the test's own (files in a directory): the
        # protocol torch's Store is adapted to (set; get with a timeout).
        def __init__(self, d):
            self.d = d
        def set(self, key, value):
            p = os.path.join(self.d, key.replace("/", "_"))
            with open(p + ".tmp", "wb") as f:
                f.write(value)
            os.replace(p + ".tmp", p)
        def get(self, key, timeout):
            import time
            p, end = os.path.join(self.d, key.replace("/", "_")), time.monotonic() + timeout
            while time.monotonic() < end:
                if os.path.exists(p):
                    return open(p, "rb").read()
                time.sleep(0.01)
            return None
        def __repr__(self):
            return "FileKV"

    if store.startswith("kv:"):
        store = FileKV(store[3:])
    try:
        e = rr.Engine.job(rank, size, store, backend="cpu", timeout=float(os.environ.get("T", "20")))
        x = np.full(1000, rank + 1, np.float64)
        if mode == "die" and rank == 1:
            os._exit(3)
        if mode == "raise" and rank == 1:
            raise RuntimeError("rank 1 gives up before the call")
        if mode == "mismatch" and rank == 1:
            e.all_reduce([x], op="max")
        else:
            e.all_reduce([x], op="sum")
        assert (x == size * (size + 1) / 2).all(), x[:4]
        g = np.zeros(3 * size, np.int32)
        e.all_gather([np.arange(3, dtype=np.int32) + 10 * rank], [g])
        assert g.tolist() == [v + 10 * r for r in range(size) for v in range(3)], g
        e.barrier()
        e.close()
        print(f"rank {rank}: OK")
    except rr.Error as err:
        print(f"rank {rank}: {type(err).__name__}: {err}")
        sys.exit(1)
    """
)


def run_job(size, mode="ok", sizes=None, timeout="20", kv=False, ranks=None):
    parent = tempfile.mkdtemp(prefix="rr-py-test-")
    store = os.path.join(parent, "store")
    kv_dir = os.path.join(parent, "kv")
    if kv:
        os.mkdir(kv_dir)
    env = dict(os.environ, T=timeout)
    procs = []
    for r in ranks if ranks is not None else range(size):
        n = sizes[r] if sizes else size
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER, str(r), str(n), "kv:" + kv_dir if kv else store, mode],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=env,
            )
        )
    outs = []
    start = time.monotonic()
    for p in procs:
        out, _ = p.communicate(timeout=120)
        outs.append((p.returncode, out))
    took = time.monotonic() - start
    assert not os.path.exists(store), f"the store {store} was left behind"
    if kv:
        # Only the test's own key file: ringreduce made no directory.
        assert os.listdir(parent) == ["kv"], os.listdir(parent)
    shutil.rmtree(parent, ignore_errors=True)
    return outs, took


@pytest.mark.parametrize("size", [2, 3])
def test_job_through_a_key_value_store(size):
    """No store directory: the ranks meet through the caller's key-value
    object (what the torch backend hands over for torch's Store)."""
    outs, _ = run_job(size, kv=True)
    for r, (rc, out) in enumerate(outs):
        assert rc == 0 and f"rank {r}: OK" in out, out


def test_key_value_job_with_a_killed_rank_ends_every_rank():
    outs, took = run_job(3, mode="die", kv=True, timeout="30")
    assert outs[1][0] == 3
    for r in (0, 2):
        rc, out = outs[r]
        assert rc == 1 and "rank 1" in out, out
    assert took < 25, f"took {took:.1f} s"


def test_key_value_job_whose_rank_0_never_comes_times_out_naming_the_key():
    outs, _ = run_job(2, kv=True, timeout="2", ranks=[1])
    rc, out = outs[0]
    assert rc == 1 and "TimeoutError" in out and "ringreduce/control" in out and "FileKV" in out, out


@pytest.mark.parametrize("size", [2, 3])
def test_job_collectives(size):
    outs, _ = run_job(size)
    for r, (rc, out) in enumerate(outs):
        assert rc == 0 and f"rank {r}: OK" in out, out


def test_killed_rank_ends_the_others():
    outs, took = run_job(2, "die", timeout="30")
    rc0, out0 = outs[0]
    assert rc0 == 1 and "PeerError" in out0 and "rank 1" in out0, out0
    assert outs[1][0] == 3
    assert took < 30, f"the survivor waited {took:.1f} s"


def test_rank_raising_before_the_call():
    outs, _ = run_job(2, "raise", timeout="30")
    rc0, out0 = outs[0]
    assert rc0 == 1 and "PeerError" in out0, out0


def test_ranks_disagree_on_the_call():
    outs, _ = run_job(2, "mismatch")
    for rc, out in outs:
        assert rc == 1 and "MismatchError" in out and "max" in out and "sum" in out, out


def test_world_size_disagrees():
    outs, _ = run_job(2, sizes=[2, 3], timeout="10")
    assert all(rc == 1 for rc, _ in outs), outs
    assert any("size" in out or "ranks" in out for _, out in outs), outs


def test_a_store_that_is_neither_a_path_nor_a_key_value_store_is_refused():
    with pytest.raises(rr.ArgumentError, match="directory path or an object with set"):
        rr.Engine.job(0, 2, object(), timeout=2)
