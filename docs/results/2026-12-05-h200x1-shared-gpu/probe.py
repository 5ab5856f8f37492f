# Where a Python call on CUDA tensors spends its time, 2-3 processes sharing GPU 0.
import os, sys, time, statistics, subprocess, tempfile, json
if len(sys.argv) > 1 and sys.argv[1] == "w":
    import torch, ringreduce as rr
    rank, size, store = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    e = rr.Engine.job(rank, size, store, backend="cuda", timeout=60)
    t = torch.zeros(2, device="cuda:0"); o = torch.zeros(2, device="cuda:0")
    res = {}
    def loop(name, fn, n=300):
        for _ in range(20): fn()
        torch.cuda.synchronize(); e.barrier()
        ts = []; tr = []
        for _ in range(n):
            a = time.perf_counter(); fn(); b = time.perf_counter(); torch.cuda.synchronize(); c = time.perf_counter()
            ts.append((c - a) * 1e6); tr.append((b - a) * 1e6)
        res[name] = (round(statistics.median(ts), 1), round(statistics.median(tr), 1))
    loop("barrier", lambda: e.barrier())
    loop("torch add_ (a kernel)", lambda: t.add_(0))
    big = torch.zeros(1 << 20, device="cuda:0"); big2 = torch.zeros(1 << 20, device="cuda:0")
    loop("torch copy_ 8 B (cudaMemcpyAsync D2D)", lambda: o.copy_(t))
    loop("torch copy_ 4 MiB", lambda: big2.copy_(big))
    loop("torch copy by a kernel (add out=)", lambda: torch.add(t, 0, out=o))
    def seq():
        o.copy_(t); t.add_(0); t.copy_(o)
    loop("torch copy_ + kernel + copy_", seq)
    loop("all_reduce in place", lambda: e.all_reduce([t]))
    loop("all_reduce out of place", lambda: e.all_reduce([t], [o]))
    h = __import__("numpy").zeros(2, "float32")
    e2 = rr.Engine.job(rank, size, store + "-cpu", backend="cpu", timeout=60)
    def cpu(): e2.all_reduce([h])
    loop("cpu job all_reduce (host array)", cpu)
    e.close(); e2.close()
    if rank == 0: print("RES", json.dumps(res))
    sys.exit(0)
for size in (2, 3):
    d = tempfile.mkdtemp(); st = os.path.join(d, "s")
    ps = [subprocess.Popen([sys.executable, __file__, "w", str(r), str(size), st], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(size)]
    outs = [p.communicate(timeout=200)[0] for p in ps]
    for l in outs[0].splitlines():
        if l.startswith("RES"):
            for k, v in json.loads(l[4:]).items(): print(f"{size} ranks: {k:36s} call+sync {v[0]:8.1f} us, return {v[1]:8.1f} us")
    if not any(l.startswith("RES") for l in outs[0].splitlines()): print(outs)
