import json,glob,statistics,sys,collections
O=sys.argv[1]
for mode in ['threads','procs']:
    t=collections.defaultdict(lambda: collections.defaultdict(list))
    for which in ['old','new']:
        for f in sorted(glob.glob(f'{O}/{mode}-{which}-*.json')):
            try: d=json.load(open(f))
            except Exception as e: print('bad',f,e); continue
            for r in d['rows']:
                for p in ['out_of_place','in_place']:
                    if r.get(p): t[(r['algo'],r['size'],p)][which].append(r[p]['time_us'])
    print(f'## {mode}: median us over rounds, new/old')
    print('| algo | size | place | old | new | new/old |'); print('|---|---:|---|---:|---:|---:|')
    ratios=[]
    for k in sorted(t, key=lambda k:(k[0],k[1],k[2])):
        o=statistics.median(t[k]['old']) if t[k]['old'] else None; n=statistics.median(t[k]['new']) if t[k]['new'] else None
        if o and n:
            ratios.append(n/o); print(f'| {k[0]} | {k[1]} | {"in" if k[2]=="in_place" else "out"} | {o:.1f} | {n:.1f} | {n/o:.3f} |')
    print(f'range new/old {min(ratios):.3f}-{max(ratios):.3f}, median {statistics.median(ratios):.3f}, cells {len(ratios)}')
