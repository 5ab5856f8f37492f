import re,statistics,sys,glob
d=sys.argv[1]
def rows(f):
    out=[]
    for l in open(f):
        l=re.sub(r'^\[rank \d+\] ','',l)
        m=re.match(r'\s+(\d+)\s+\d+\s+float\s+sum\s+-?\d+\s+([\d.]+)\s+\S+\s+\S+\s+\d+\s+([\d.]+)\s+\S+\s+\S+\s+\d+\s+(\S+)',l)
        if m: out.append((int(m.group(1)),float(m.group(2)),float(m.group(3)),m.group(4)))
    return out
def mpi(f):
    r={}
    for l in open(f):
        m=re.search(r'(\d+) B: median\s+([\d.]+)',l)
        if m: r[int(m.group(1))]=float(m.group(2))
    return r
for kind,algos in (("nodes",["auto","ring","hier:2"]),("node",["auto","ring","ring:pipe2","ps"])):
    res={}
    for r in (1,2,3):
        rs=rows(f"{d}/r{r}-{kind}.log")
        sizes=sorted(set(x[0] for x in rs)); k=len(sizes)
        for i,a in enumerate(algos):
            for (sz,oop,inp,name) in rs[i*k:(i+1)*k]:
                res.setdefault((a,sz),[]).append((inp,oop,name))
    M={}
    for r in (1,2,3):
        for sz,v in mpi(f"{d}/r{r}-mpi.log").items(): M.setdefault(sz,[]).append(v)
    print("==",kind)
    for sz in sizes:
        m=statistics.median(M[sz])
        line=f"{sz:>9} mpi {m:8.1f} ({min(M[sz]):.1f}-{max(M[sz]):.1f})"
        for a in algos:
            v=res[(a,sz)]; ip=statistics.median(x[0] for x in v); op=statistics.median(x[1] for x in v)
            line+=f" | {a} in {ip:7.1f} ({ip/m:.2f}x) oop {op:7.1f} [{min(x[0] for x in v):.0f}-{max(x[0] for x in v):.0f}] {v[0][2]}"
        print(line)
