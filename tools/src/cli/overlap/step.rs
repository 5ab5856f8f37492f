//! One configuration of the overlap benchmark: buffers, the compute / communication / overlapped phases, the per-bucket checks and the measured spans.

use super::*;

/// Allocate one configuration's buffers.
pub(super) fn alloc(core: &mut Engine, p: &Settings, kind: KernelKind, n: usize) -> Result<Bufs> {
    let ranks = core.ranks();
    let mut buckets = Vec::with_capacity(p.buckets);
    for _ in 0..p.buckets {
        buckets.push(core.alloc_id(&vec![4 * n; ranks])?);
    }
    let bind = buckets
        .iter()
        .map(|&id| Arc::new(vec![Binding { send: id, recv: id }; ranks]))
        .collect();
    let (x, y) = if kind == KernelKind::Mem && p.passes > 0 {
        let bytes = 4 * n * p.passes as usize * p.buckets;
        (
            Some(core.alloc_id(&vec![bytes; ranks])?),
            Some(core.alloc_id(&vec![bytes; ranks])?),
        )
    } else {
        (None, None)
    };
    let ctr = core.alloc_id(&vec![16 * p.buckets; ranks])?;
    Ok(Bufs {
        buckets,
        bind,
        x,
        y,
        ctr,
    })
}

pub(super) fn free(core: &mut Engine, b: Bufs) -> Result<()> {
    for id in b.buckets.into_iter().chain(b.x).chain(b.y).chain([b.ctr]) {
        core.free_id(id)?;
    }
    Ok(())
}

/// A device check's outcome: the wrong count and, if any, (rank, bucket,
/// first wrong index).
pub(super) type Checked = (u64, Option<(usize, usize, u64)>);

/// What the kernels and checks share: the kernels, the plan, the buffers.
pub(super) struct Ctx<'a> {
    p: &'a Settings,
    kind: KernelKind,
    n: usize,
    bufs: &'a Bufs,
    fma: Arc<WorkKernel>,
    mem: Arc<WorkKernel>,
    check: Arc<WorkKernel>,
}

impl Ctx<'_> {
    /// Bucket b's kernel of `step`; `full` false: only the values (no FMA,
    /// no pass), to fill the buckets before the communication-alone phase.
    pub(super) fn produce(
        &self,
        core: &mut Engine,
        b: usize,
        step: u32,
        full: bool,
        tag: Option<SpanTag>,
    ) -> Result<()> {
        let n = self.n;
        let bucket = WorkArg::Buf {
            id: self.bufs.buckets[b],
            offset: 0,
            bytes: 4 * n,
        };
        let w = match self.kind {
            KernelKind::Fma => WorkLaunch {
                kernel: self.fma.clone(),
                grid: Grid::Items(n as u64),
                block: BLOCK,
                args: vec![
                    bucket,
                    WorkArg::U64(n as u64),
                    WorkArg::U32(if full { self.p.fma_iters } else { 0 }),
                    WorkArg::F32(FMA_M),
                    WorkArg::F32(FMA_C),
                    WorkArg::Rank,
                    WorkArg::U32(b as u32),
                    WorkArg::U32(step),
                ],
                tag,
            },
            KernelKind::Mem => {
                let passes = if full { self.p.passes } else { 0 };
                let slice = 4 * n * self.p.passes as usize;
                let region = |id: Option<BufId>| match id {
                    Some(id) if passes > 0 => WorkArg::Buf {
                        id,
                        offset: b * slice,
                        bytes: slice,
                    },
                    _ => WorkArg::Buf {
                        id: self.bufs.buckets[b],
                        offset: 0,
                        bytes: 0,
                    },
                };
                WorkLaunch {
                    kernel: self.mem.clone(),
                    grid: Grid::Items(n as u64 / 4),
                    block: BLOCK,
                    args: vec![
                        bucket,
                        WorkArg::U64(n as u64),
                        region(self.bufs.x),
                        region(self.bufs.y),
                        WorkArg::U32(passes),
                        WorkArg::F32(0.5),
                        WorkArg::Rank,
                        WorkArg::U32(b as u32),
                        WorkArg::U32(step),
                    ],
                    tag,
                }
            }
        };
        core.work_launch(&w)
    }

    /// Check every bucket of `step` on the device: each rank's own values
    /// (`reduced` false) or the sum of all ranks'. Returns the wrong count
    /// and, if any, (rank, bucket, first wrong index).
    pub(super) fn check(&self, core: &mut Engine, step: u32, reduced: bool) -> Result<Checked> {
        let ranks = core.ranks();
        let init: Vec<u64> = (0..self.p.buckets).flat_map(|_| [0, u64::MAX]).collect();
        for r in 0..ranks {
            core.write(r, self.bufs.ctr, 0, bytemuck::cast_slice(&init))?;
        }
        for (b, &id) in self.bufs.buckets.iter().enumerate() {
            let (first, count) = if reduced {
                (WorkArg::U32(0), ranks as u32)
            } else {
                (WorkArg::Rank, 1)
            };
            core.work_launch(&WorkLaunch {
                kernel: self.check.clone(),
                grid: Grid::Items(self.n as u64),
                block: BLOCK,
                args: vec![
                    WorkArg::Buf {
                        id,
                        offset: 0,
                        bytes: 4 * self.n,
                    },
                    WorkArg::U64(self.n as u64),
                    WorkArg::Buf {
                        id: self.bufs.ctr,
                        offset: 16 * b,
                        bytes: 16,
                    },
                    first,
                    WorkArg::U32(count),
                    WorkArg::U32(b as u32),
                    WorkArg::U32(step),
                ],
                tag: None,
            })?;
        }
        let mut wrong = 0;
        let mut first_bad = None;
        for r in 0..ranks {
            let mut c = vec![0u64; 2 * self.p.buckets];
            core.read(r, self.bufs.ctr, 0, bytemuck::cast_slice_mut(&mut c))?;
            for b in 0..self.p.buckets {
                wrong += c[2 * b];
                if c[2 * b] > 0 && first_bad.is_none() {
                    first_bad = Some((r, b, c[2 * b + 1]));
                }
            }
        }
        Ok((wrong, first_bad))
    }

    /// Read every bucket of every rank and compare with the exact sums on
    /// the host: (elements, wrong).
    pub(super) fn host_check(&self, core: &mut Engine, step: u32) -> Result<(u64, u64)> {
        let ranks = core.ranks() as u32;
        let mut wrong = 0u64;
        let mut got = vec![0f32; self.n];
        for r in 0..core.ranks() {
            for (b, &id) in self.bufs.buckets.iter().enumerate() {
                core.read(r, id, 0, bytemuck::cast_slice_mut(&mut got))?;
                wrong += got
                    .par_iter()
                    .enumerate()
                    .filter(|(i, g)| {
                        g.to_bits() != grad_sum(0, ranks, b as u32, *i as u64, step).to_bits()
                    })
                    .count() as u64;
            }
        }
        Ok((u64::from(ranks) * (self.p.buckets * self.n) as u64, wrong))
    }
}

/// Bucket b's all-reduce by contender `c`, after the work stream.
pub(super) fn reduce(
    core: &mut Engine,
    c: &Contender,
    bufs: &Bufs,
    n: usize,
    b: usize,
    tag: Option<SpanTag>,
) -> Result<Vec<Completion>> {
    match &c.kind {
        ContenderKind::Nccl(buffers) => core.launch_nccl_after(
            &NcclCall {
                collective: Collective::AllReduce,
                count: n,
                dtype: DataType::Float,
                op: ReduceOp::Sum,
                in_place: true,
                bind: bufs.bind[b].clone(),
                buffers: *buffers,
            },
            &After::Work,
            tag,
        ),
        ContenderKind::Engine(choice) => {
            let shape = Shape::all_reduce(core.ranks(), n, 4, true);
            core.launch_after(
                Some(choice),
                shape,
                DataType::Float,
                ReduceOp::Sum,
                bufs.bind[b].clone(),
                &After::Work,
                tag,
            )
            .map(|(_, done)| done)
        }
        _ => Err(Error::BadArgument(format!(
            "{}: not an overlap contender",
            c.name
        ))),
    }
}

/// Per rank: (first start, last end, sum of durations) of the spans named
/// `what` (all spans for `None`).
pub(super) fn extent(
    spans: &[WorkSpan],
    rank: usize,
    what: Option<&str>,
) -> Option<(f64, f64, f64)> {
    let mut it = spans
        .iter()
        .filter(|s| s.rank == rank && what.is_none_or(|w| s.what == w));
    let first = it.next()?;
    let mut e = (first.start_ns, first.end_ns, first.end_ns - first.start_ns);
    for s in it {
        e.0 = e.0.min(s.start_ns);
        e.1 = e.1.max(s.end_ns);
        e.2 += s.end_ns - s.start_ns;
    }
    Some(e)
}

/// The slowest rank's span of `what` from `from`'s first start (us).
pub(super) fn phase_us(spans: &[WorkSpan], ranks: usize, from: &str, what: Option<&str>) -> f64 {
    (0..ranks)
        .filter_map(|r| {
            let start = extent(spans, r, Some(from))?.0;
            let end = extent(spans, r, what)?.1;
            Some((end - start) / 1e3)
        })
        .fold(0.0, f64::max)
}

/// The ranks' mean sum of kernel durations (us).
pub(super) fn kernel_sum_us(spans: &[WorkSpan], ranks: usize) -> f64 {
    let v: Vec<f64> = (0..ranks)
        .filter_map(|r| extent(spans, r, Some("kernel")).map(|e| e.2 / 1e3))
        .collect();
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

pub(super) fn run_config(
    core: &mut Engine,
    p: &Settings,
    contenders: &[Contender],
    kind: KernelKind,
    bytes: usize,
) -> Result<(ConfigResult, TimelineConfig)> {
    let n = bytes / 4;
    let ranks = core.ranks();
    crate::note!(
        "overlap: {} kernel, {} buckets of {}",
        kind.name(),
        p.buckets,
        format_bytes(bytes as u64)
    );
    let bufs = alloc(core, p, kind, n)?;
    let cx = Ctx {
        p,
        kind,
        n,
        bufs: &bufs,
        fma: Arc::new(host::kernel(Builtin::GradFma)),
        mem: Arc::new(host::kernel(Builtin::GradMem)),
        check: Arc::new(host::kernel(Builtin::GradCheck)),
    };
    let shape = Shape::all_reduce(ranks, n, 4, true);
    let mut rows: Vec<Row> = Vec::new();
    for c in contenders {
        let path = match &c.kind {
            ContenderKind::Engine(choice) => core.prepare(Some(choice), shape)?,
            _ => "-".into(),
        };
        rows.push(Row {
            contender: c.name.clone(),
            path,
            ..Row::default()
        });
    }
    let mut last_spans: Vec<Vec<WorkSpan>> = vec![Vec::new(); contenders.len()];
    let mut step: u32 = 0;
    for s in 0..p.warmup + p.steps {
        let last = s + 1 == p.warmup + p.steps;
        for (ci, c) in contenders.iter().enumerate() {
            let spans = one_step(core, &cx, c, &mut rows[ci], &mut step, s)?;
            if last {
                last_spans[ci] = spans;
            }
        }
    }
    for row in &mut rows {
        summarize(row);
    }
    free(core, bufs)?;
    let (flop, hbm, us) = model(kind, n, p.fma_iters, p.passes);
    let tl = TimelineConfig {
        kernel: kind.name(),
        bucket_bytes: bytes as u64,
        runs: contenders
            .iter()
            .zip(last_spans)
            .map(|(c, spans)| TimelineRun {
                contender: c.name.clone(),
                spans,
            })
            .collect(),
    };
    Ok((
        ConfigResult {
            kernel: kind.name(),
            bucket_bytes: bytes as u64,
            bucket_elems: n,
            buckets: p.buckets,
            fmas_per_element: 32 * p.fma_iters,
            passes: p.passes,
            flop_per_bucket: flop,
            hbm_bytes_per_bucket: hbm,
            model_us_per_bucket: us,
            max_efficiency: (p.buckets as f64 - 1.0) / p.buckets as f64,
            rows,
        },
        tl,
    ))
}

/// Step `s` of one contender: compute alone, communication alone and the
/// overlapped step, each checked, their times into `row` once timed.
/// Returns the overlapped step's spans.
fn one_step(
    core: &mut Engine,
    cx: &Ctx<'_>,
    c: &Contender,
    row: &mut Row,
    step: &mut u32,
    s: usize,
) -> Result<Vec<WorkSpan>> {
    let (p, n) = (cx.p, cx.n);
    let ranks = core.ranks();
    let timed = s >= p.warmup;
    let last = s + 1 == p.warmup + p.steps;
    let kernel = |b: usize| {
        Some(SpanTag {
            what: "kernel",
            index: b as u32,
        })
    };
    let coll = |b: usize| {
        Some(SpanTag {
            what: "collective",
            index: b as u32,
        })
    };
    // -- compute alone
    *step = step.wrapping_add(1);
    let gate = open_phase(core, p.gate && s > 0)?;
    for b in 0..p.buckets {
        cx.produce(core, b, *step, true, kernel(b))?;
    }
    gate.open();
    core.synchronize()?;
    let spans = core.take_work_spans()?;
    let compute = phase_us(&spans, ranks, "kernel", Some("kernel"));
    let k_alone = kernel_sum_us(&spans, ranks);
    tally(
        row,
        &cx.check(core, *step, false)?,
        p.buckets * ranks,
        n,
        c,
        "compute alone",
        *step,
    )?;
    // -- communication alone
    *step = step.wrapping_add(1);
    for b in 0..p.buckets {
        cx.produce(core, b, *step, false, None)?;
    }
    core.synchronize()?;
    let gate = open_phase(core, p.gate && s > 0)?;
    for b in 0..p.buckets {
        reduce(core, c, cx.bufs, n, b, coll(b))?;
    }
    gate.open();
    core.synchronize()?;
    let spans = core.take_work_spans()?;
    let comm = phase_us(&spans, ranks, "collective", Some("collective"));
    tally(
        row,
        &cx.check(core, *step, true)?,
        p.buckets * ranks,
        n,
        c,
        "communication alone",
        *step,
    )?;
    // -- the overlapped step
    *step = step.wrapping_add(1);
    let gate = open_phase(core, p.gate && s > 0)?;
    for b in 0..p.buckets {
        cx.produce(core, b, *step, true, kernel(b))?;
        reduce(core, c, cx.bufs, n, b, coll(b))?;
    }
    gate.open();
    core.synchronize()?;
    let spans = core.take_work_spans()?;
    let overlapped = phase_us(&spans, ranks, "kernel", None);
    let k_over = kernel_sum_us(&spans, ranks);
    tally(
        row,
        &cx.check(core, *step, true)?,
        p.buckets * ranks,
        n,
        c,
        "overlapped step",
        *step,
    )?;
    if last && p.host_check {
        let (elems, wrong) = cx.host_check(core, *step)?;
        row.host_checked_elements += elems;
        row.host_wrong += wrong;
        if wrong > 0 {
            crate::note!(
                "overlap: {}: the host check of the last step found {wrong} wrong elements",
                c.name
            );
        }
    }
    if timed {
        let sm = &mut row.samples;
        sm.compute_us.push(compute);
        sm.comm_us.push(comm);
        sm.step_us.push(overlapped);
        sm.kernels_alone_us.push(k_alone);
        sm.kernels_overlapped_us.push(k_over);
    }
    Ok(spans)
}

/// A row's medians, ideal, efficiency and slowdown from its samples.
fn summarize(row: &mut Row) {
    let sm = &row.samples;
    row.compute_us = median(sm.compute_us.clone());
    row.comm_us = median(sm.comm_us.clone());
    row.step_us = median(sm.step_us.clone());
    row.kernels_alone_us = median(sm.kernels_alone_us.clone());
    row.kernels_overlapped_us = median(sm.kernels_overlapped_us.clone());
    row.ideal_us = row.compute_us.max(row.comm_us);
    let shorter = row.compute_us.min(row.comm_us);
    row.efficiency = if shorter > 0.0 {
        (row.compute_us + row.comm_us - row.step_us) / shorter
    } else {
        0.0
    };
    row.slowdown = if row.kernels_alone_us > 0.0 {
        row.kernels_overlapped_us / row.kernels_alone_us - 1.0
    } else {
        0.0
    };
}

/// Start a timed phase: a new timing origin, and a closed gate if `gated`
/// (an open no-op gate otherwise). The first step of every configuration
/// runs ungated: whatever loads lazily on first use (modules, NCCL's
/// connections) must not wait behind a closed gate.
pub(super) fn open_phase(core: &mut Engine, gated: bool) -> Result<Gate> {
    core.work_mark()?;
    if gated {
        core.work_gate()
    } else {
        Ok(Gate::default())
    }
}

/// Add one step's device check to a row (and report a failure at once).
pub(super) fn tally(
    row: &mut Row,
    got: &Checked,
    checks: usize,
    n: usize,
    c: &Contender,
    phase: &str,
    step: u32,
) -> Result<()> {
    row.bucket_checks += checks as u64;
    row.elements_checked += (checks * n) as u64;
    row.wrong += got.0;
    if let Some((r, b, i)) = got.1 {
        crate::note!(
            "overlap: {}: {phase} (step {step}): {} wrong elements; first: rank {r} bucket {b} element {i}",
            c.name, got.0
        );
    }
    Ok(())
}
