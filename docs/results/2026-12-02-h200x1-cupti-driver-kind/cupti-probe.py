#!/usr/bin/env python3
"""Which CUPTI set-up delivers activity records on this machine?

A diagnostic for the timeline's CUPTI source (src/cuda/cupti/): it drives
the driver and CUPTI through ctypes, the way the engine does (primary
context, a PTX kernel launched with cuLaunchKernel, cuMemcpyDtoDAsync and
cuMemcpyPeerAsync on a stream), under one CUPTI configuration per process,
and prints per configuration how many buffers CUPTI asked for and returned
and how many records of each kind it delivered, and whether the external
correlation ids pushed around the work came back tied to the work's
records.

    python3 scripts/cupti-probe.py            # every configuration
    python3 scripts/cupti-probe.py CONFIG     # one, in this process
    python3 scripts/cupti-probe.py cost       # host us per op under each set-up

Needs a GPU, libcuda and libcupti (CUPTI_LIB or the CUDA 13 toolkit path).
"""
import ctypes as C
import os
import subprocess
import sys
import threading

CUPTI_DIRS = [
    "/usr/local/cuda/targets/x86_64-linux/lib",
    "/usr/local/cuda-13.0/targets/x86_64-linux/lib",
    "/usr/local/cuda/extras/CUPTI/lib64",
]
# CUPTI_ActivityKind values of CUDA 13's cupti_activity.h (read through
# cudarc 0.19.10's bindings).
K = dict(MEMCPY=1, MEMSET=2, KERNEL=3, DRIVER=4, RUNTIME=5,
         CONCURRENT_KERNEL=10, MEMCPY2=22, SYNCHRONIZATION=38,
         EXTERNAL_CORRELATION=39)
NAMES = {v: k for k, v in K.items()}
# Driver callback ids: cuLaunchKernel, cuLaunchKernelEx, cuMemcpyPeerAsync,
# cuMemcpyAsync, cuMemcpyDtoDAsync_v2.
CBIDS = [307, 652, 319, 306, 281]
# The host's polling and synchronizing calls: cuStreamQuery,
# cuStreamSynchronize, cuEventQuery, cuEventRecord, cuStreamWaitEvent.
QUIET = [125, 126, 120, 119, 295]
# Offsets of correlationId per record kind (cudarc's offset_of!).
CORR = {10: 92, 3: 92, 1: 44, 22: 60, 2: 44, 4: 32, 5: 32}
ENGINE_KINDS = ["CONCURRENT_KERNEL", "MEMCPY", "MEMCPY2", "MEMSET",
                "SYNCHRONIZATION", "EXTERNAL_CORRELATION"]

CONFIGS = {
    # What the engine does today: kinds enabled after the context ran
    # work, selected driver APIs only, work from the enabling thread.
    "engine": dict(kinds=ENGINE_KINDS, driver_apis=True),
    # The same with the whole driver API kind on.
    "engine+driver": dict(kinds=ENGINE_KINDS + ["DRIVER"], driver_apis=False),
    "engine+driver+selected": dict(kinds=ENGINE_KINDS + ["DRIVER"], driver_apis=True),
    # The whole driver kind, then the polling calls switched off (does a
    # per-call switch filter once the kind is on?).
    "driver-quiet": dict(kinds=ENGINE_KINDS + ["DRIVER"], driver_apis=False, quiet=True),
    # Kinds enabled before the context exists.
    "early": dict(kinds=ENGINE_KINDS, driver_apis=True, early=True),
    "early+driver": dict(kinds=ENGINE_KINDS + ["DRIVER"], driver_apis=False, early=True),
    # Work issued from another thread than the one that enabled CUPTI
    # (rank threads).
    "thread": dict(kinds=ENGINE_KINDS, driver_apis=True, thread=True),
    "thread+driver": dict(kinds=ENGINE_KINDS + ["DRIVER"], driver_apis=False, thread=True),
    # No subscriber handle (some tools only register buffers).
    "nosubscribe": dict(kinds=ENGINE_KINDS, driver_apis=True, subscribe=False),
    # Only kernels and copies, no external ids (are records delivered at all?).
    "plain": dict(kinds=["CONCURRENT_KERNEL", "MEMCPY", "MEMCPY2"], driver_apis=False),
}

# `cost`: the host's time per op (a kernel launch, a device copy, a peer
# copy, each with a stream query, as a rank issues them) under each set-up,
# pushed ids included where the set-up has external correlations. What the
# timeline's overhead is made of, kind by kind.
COSTS = {
    "off": dict(kinds=[]),
    "kernel": dict(kinds=["CONCURRENT_KERNEL"]),
    "memcpy": dict(kinds=["MEMCPY", "MEMCPY2"]),
    "driver-quiet": dict(kinds=["DRIVER"], quiet_all=True),
    "driver-all": dict(kinds=["DRIVER"]),
    "sync": dict(kinds=["SYNCHRONIZATION"]),
    "engine": dict(kinds=["CONCURRENT_KERNEL", "MEMCPY", "MEMCPY2", "MEMSET", "DRIVER",
                          "EXTERNAL_CORRELATION"], quiet_all=True, push=True),
}

PTX = b"""
.version 7.0
.target sm_70
.address_size 64
.visible .entry bump(.param .u64 p)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<2>;
    ld.param.u64 %rd1, [p];
    cvta.to.global.u64 %rd1, %rd1;
    ld.global.u32 %r1, [%rd1];
    add.u32 %r1, %r1, 1;
    st.global.u32 [%rd1], %r1;
    ret;
}
"""


def load_cupti():
    names = [os.environ.get("CUPTI_LIB")] if os.environ.get("CUPTI_LIB") else []
    names += ["libcupti.so.13", "libcupti.so"] + [os.path.join(d, "libcupti.so.13") for d in CUPTI_DIRS]
    for n in names:
        try:
            return C.CDLL(n), n
        except OSError:
            continue
    sys.exit("SKIPPED: libcupti not found")


def ck(r, what):
    if r != 0:
        raise RuntimeError(f"{what} failed: {r}")


def run(name):
    cfg = CONFIGS[name]
    cu = C.CDLL("libcuda.so.1")
    cupti, path = load_cupti()
    stats = dict(requested=0, completed=0, dropped=0)
    records = []  # (kind, correlation, external)
    keep = {}

    REQ = C.CFUNCTYPE(None, C.POINTER(C.c_void_p), C.POINTER(C.c_size_t), C.POINTER(C.c_size_t))
    COMP = C.CFUNCTYPE(None, C.c_void_p, C.c_uint32, C.c_void_p, C.c_size_t, C.c_size_t)

    def requested(buf, size, maxrec):
        b = C.create_string_buffer(8 << 20)
        addr = C.addressof(b)
        pad = (-addr) % 8
        keep[addr + pad] = b
        buf[0] = addr + pad
        size[0] = (8 << 20) - pad
        maxrec[0] = 0
        stats["requested"] += 1

    def completed(ctx, stream, buf, size, valid):
        stats["completed"] += 1
        rec = C.c_void_p()
        while cupti.cuptiActivityGetNextRecord(C.c_void_p(buf), C.c_size_t(valid), C.byref(rec)) == 0:
            kind = C.c_uint32.from_address(rec.value).value
            if kind == 39:
                ext = C.c_uint64.from_address(rec.value + 8).value
                corr = C.c_uint32.from_address(rec.value + 16).value
                records.append((kind, corr, ext))
            elif kind in CORR:
                records.append((kind, C.c_uint32.from_address(rec.value + CORR[kind]).value, 0))
            else:
                records.append((kind, 0, 0))
        d = C.c_size_t(0)
        cupti.cuptiActivityGetNumDroppedRecords(C.c_void_p(ctx), C.c_uint32(stream), C.byref(d))
        stats["dropped"] += d.value
        keep.pop(buf, None)

    req_cb, comp_cb = REQ(requested), COMP(completed)

    def setup_cupti():
        if cfg.get("subscribe", True):
            h = C.c_void_p()
            ck(cupti.cuptiSubscribe(C.byref(h), None, None), "cuptiSubscribe")
        ck(cupti.cuptiActivityRegisterCallbacks(req_cb, comp_cb), "cuptiActivityRegisterCallbacks")

    def enable():
        for k in cfg["kinds"]:
            ck(cupti.cuptiActivityEnable(K[k]), f"cuptiActivityEnable({k})")
        if cfg["driver_apis"]:
            for cb in CBIDS:
                ck(cupti.cuptiActivityEnableDriverApi(cb, 1), f"cuptiActivityEnableDriverApi({cb})")
        if cfg.get("quiet"):
            for cb in QUIET:
                ck(cupti.cuptiActivityEnableDriverApi(cb, 0), f"cuptiActivityEnableDriverApi({cb}, 0)")

    setup_cupti()
    if cfg.get("early"):
        enable()
    ck(cu.cuInit(0), "cuInit")
    dev = C.c_int()
    ck(cu.cuDeviceGet(C.byref(dev), 0), "cuDeviceGet")
    ctx = C.c_void_p()
    ck(cu.cuDevicePrimaryCtxRetain(C.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    ck(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    mod = C.c_void_p()
    ck(cu.cuModuleLoadData(C.byref(mod), C.c_char_p(PTX)), "cuModuleLoadData")
    fn = C.c_void_p()
    ck(cu.cuModuleGetFunction(C.byref(fn), mod, b"bump"), "cuModuleGetFunction")
    a, b = C.c_uint64(), C.c_uint64()
    ck(cu.cuMemAlloc_v2(C.byref(a), C.c_size_t(1 << 20)), "cuMemAlloc")
    ck(cu.cuMemAlloc_v2(C.byref(b), C.c_size_t(1 << 20)), "cuMemAlloc")
    st = C.c_void_p()
    ck(cu.cuStreamCreate(C.byref(st), 1), "cuStreamCreate")

    def work(tag):
        arg = C.c_uint64(a.value)
        params = (C.c_void_p * 1)(C.cast(C.byref(arg), C.c_void_p))
        ids = []
        for i, op in enumerate(["kernel", "dtod", "peer"]):
            ext = tag * 100 + i + 1
            ids.append((op, ext))
            ck(cupti.cuptiActivityPushExternalCorrelationId(3, C.c_uint64(ext)), "push")
            if op == "kernel":
                ck(cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, st, params, None), "cuLaunchKernel")
            elif op == "dtod":
                ck(cu.cuMemcpyDtoDAsync_v2(b, a, C.c_size_t(1 << 20), st), "cuMemcpyDtoDAsync")
            else:
                ck(cu.cuMemcpyPeerAsync(b, ctx, a, ctx, C.c_size_t(1 << 20), st), "cuMemcpyPeerAsync")
            last = C.c_uint64()
            ck(cupti.cuptiActivityPopExternalCorrelationId(3, C.byref(last)), "pop")
        for _ in range(10):
            cu.cuStreamQuery(st)
        ck(cu.cuStreamSynchronize(st), "cuStreamSynchronize")
        return ids

    work(0)  # the context ran work before CUPTI is enabled (as in the engine)
    if not cfg.get("early"):
        enable()
    if cfg.get("thread"):
        out = {}

        def body():
            ck(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
            out["ids"] = work(1)

        t = threading.Thread(target=body)
        t.start()
        t.join()
        ids = out["ids"]
    else:
        ids = work(1)
    ck(cupti.cuptiActivityFlushAll(1), "cuptiActivityFlushAll")
    by_kind = {}
    for k, _, _ in records:
        by_kind[NAMES.get(k, k)] = by_kind.get(NAMES.get(k, k), 0) + 1
    ext = {e: c for k, c, e in records if k == 39}
    tied = []
    for op, e in ids:
        corr = ext.get(e)
        kinds = sorted({NAMES.get(k, k) for k, c, _ in records if corr is not None and c == corr and k != 39})
        tied.append(f"{op}:{'-' if corr is None else kinds or 'no work record'}")
    print(f"{name:24s} requested={stats['requested']} completed={stats['completed']} dropped={stats['dropped']} "
          f"records={dict(sorted(by_kind.items()))} ext_ids={len(ext)} tied=[{', '.join(tied)}]  ({path})",
          flush=True)


def cost(name, n=3000):
    cfg = COSTS[name]
    cu = C.CDLL("libcuda.so.1")
    cupti, _ = load_cupti()
    keep = {}
    REQ = C.CFUNCTYPE(None, C.POINTER(C.c_void_p), C.POINTER(C.c_size_t), C.POINTER(C.c_size_t))
    COMP = C.CFUNCTYPE(None, C.c_void_p, C.c_uint32, C.c_void_p, C.c_size_t, C.c_size_t)

    def requested(buf, size, maxrec):
        b = C.create_string_buffer(8 << 20)
        keep[C.addressof(b)] = b
        buf[0] = C.addressof(b)
        size[0] = 8 << 20
        maxrec[0] = 0

    def completed(ctx, stream, buf, size, valid):
        keep.pop(buf, None)

    req_cb, comp_cb = REQ(requested), COMP(completed)
    h = C.c_void_p()
    ck(cupti.cuptiSubscribe(C.byref(h), None, None), "cuptiSubscribe")
    ck(cupti.cuptiActivityRegisterCallbacks(req_cb, comp_cb), "register")
    ck(cu.cuInit(0), "cuInit")
    dev, ctx = C.c_int(), C.c_void_p()
    ck(cu.cuDeviceGet(C.byref(dev), 0), "cuDeviceGet")
    ck(cu.cuDevicePrimaryCtxRetain(C.byref(ctx), dev), "retain")
    ck(cu.cuCtxSetCurrent(ctx), "set")
    mod, fn = C.c_void_p(), C.c_void_p()
    ck(cu.cuModuleLoadData(C.byref(mod), C.c_char_p(PTX)), "load")
    ck(cu.cuModuleGetFunction(C.byref(fn), mod, b"bump"), "fn")
    a, b = C.c_uint64(), C.c_uint64()
    ck(cu.cuMemAlloc_v2(C.byref(a), C.c_size_t(4096)), "alloc")
    ck(cu.cuMemAlloc_v2(C.byref(b), C.c_size_t(4096)), "alloc")
    st = C.c_void_p()
    ck(cu.cuStreamCreate(C.byref(st), 1), "stream")
    arg = C.c_uint64(a.value)
    params = (C.c_void_p * 1)(C.cast(C.byref(arg), C.c_void_p))
    import time

    def loop(k):
        t = time.perf_counter()
        last = C.c_uint64()
        for i in range(k):
            for op in range(3):
                if cfg.get("push"):
                    cupti.cuptiActivityPushExternalCorrelationId(3, C.c_uint64(i * 3 + op + 1))
                if op == 0:
                    cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, st, params, None)
                elif op == 1:
                    cu.cuMemcpyDtoDAsync_v2(b, a, C.c_size_t(4096), st)
                else:
                    cu.cuMemcpyPeerAsync(b, ctx, a, ctx, C.c_size_t(4096), st)
                if cfg.get("push"):
                    cupti.cuptiActivityPopExternalCorrelationId(3, C.byref(last))
                cu.cuStreamQuery(st)
            if i % 64 == 63:
                cu.cuStreamSynchronize(st)
        cu.cuStreamSynchronize(st)
        return (time.perf_counter() - t) * 1e6 / (3 * k)

    loop(200)  # warm
    for k in cfg["kinds"]:
        ck(cupti.cuptiActivityEnable(K[k]), f"enable {k}")
    if cfg.get("quiet_all"):
        for cb in range(1, 677):
            if cb not in CBIDS:
                cupti.cuptiActivityEnableDriverApi(cb, 0)
    us = min(loop(n) for _ in range(3))
    cupti.cuptiActivityFlushAll(1)
    print(f"cost {name:14s} {us:7.2f} us per op (launch or copy, with a stream query), best of 3 x {n} x 3 ops",
          flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "cost":
        cost(sys.argv[2])
    elif len(sys.argv) > 1 and sys.argv[1] == "cost":
        for n in COSTS:
            p = subprocess.run([sys.executable, __file__, "cost", n], capture_output=True, text=True, timeout=120)
            sys.stdout.write(p.stdout or "")
            if p.returncode != 0:
                print(f"cost {n:14s} FAILED rc={p.returncode}: {p.stderr.strip()[-300:]}")
    elif len(sys.argv) > 1:
        run(sys.argv[1])
    else:
        for n in CONFIGS:
            p = subprocess.run([sys.executable, __file__, n], capture_output=True, text=True, timeout=120)
            sys.stdout.write(p.stdout or "")
            if p.returncode != 0:
                print(f"{n:24s} FAILED rc={p.returncode}: {p.stderr.strip()[-400:]}")
