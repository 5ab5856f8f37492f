//! `ringreduce topo`: the GPUs, the link between every pair (peer access,
//! the driver's P2P performance rank, native atomics), peer-copy bandwidth
//! (one direction, both at once) and latency measured through the engine,
//! and the ring order the engine uses and why. Without a GPU it says so and
//! lists the CPU facts; `--backend cpu` runs the same measurements on two
//! host ranks (a dry run: the numbers are memcpy between host buffers).

use super::{check_host_memory, out, Common};
use crate::bench::median;
use ringreduce::algo::probe;
use ringreduce::backend::{BackendChoice, Binding, BufId};
use ringreduce::element::DataType;
use ringreduce::engine::{Engine, EngineConfig};
use ringreduce::error::{Error, Result};
use ringreduce::plan::{OpKind, Plan};
use ringreduce::size::format_bytes;
use std::sync::Arc;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct TopoArgs {
    /// Where to measure: cuda (every pair of GPUs), cpu (a dry run on two
    /// host ranks), auto (cuda when a GPU is present; otherwise only the
    /// facts).
    #[arg(long, value_parser = crate::cli::backend_arg(), default_value = "auto")]
    pub backend: BackendChoice,
    /// GPUs to include, comma-separated (default: all).
    #[arg(long, value_delimiter = ',')]
    pub devices: Option<Vec<usize>>,
    /// Ranks of the ring order shown (default: one per GPU).
    #[arg(long)]
    pub ranks: Option<usize>,
    /// Bytes per bandwidth probe.
    #[arg(long, default_value = "256MiB", allow_hyphen_values = true)]
    pub size: String,
    /// Back-to-back copies per timed block of a bandwidth probe (the median
    /// of 3 blocks).
    #[arg(long, default_value_t = 5)]
    pub iters: usize,
    /// 4-byte copies for the latency (median).
    #[arg(long, default_value_t = 200)]
    pub latency_iters: usize,
    /// Only the driver's facts and the ring order; measure nothing.
    #[arg(long)]
    pub no_measure: bool,
    /// Give up on any wait after this many seconds.
    #[arg(long)]
    pub timeout: Option<f64>,
}

/// One endpoint pair's measurements (`None`: not measured).
#[derive(Debug, Clone, Copy, Default)]
struct Cell {
    /// GB/s, one direction alone.
    one_way: Option<f64>,
    /// GB/s per direction, both at once.
    both: Option<f64>,
    /// µs: launch + synchronize of a 4-byte copy, on the host.
    host_us: Option<f64>,
    /// µs: the 4-byte copy's duration between its timing events.
    device_us: Option<f64>,
}

pub fn execute(a: TopoArgs) -> Result<bool> {
    let bytes = super::size_arg("--size", &a.size)?;
    if bytes < 4 || bytes % 4 != 0 || bytes > 1 << 36 {
        return Err(Error::BadArgument(format!(
            "--size {:?}: a bandwidth probe is a positive multiple of 4 bytes, at most 64GiB",
            a.size
        )));
    }
    if a.iters == 0 || a.iters > 10_000 || a.latency_iters == 0 || a.latency_iters > 1_000_000 {
        return Err(Error::BadArgument(
            "--iters must be 1 to 10000 and --latency-iters 1 to 1000000".into(),
        ));
    }
    if let Some(d) = &a.devices {
        if d.is_empty() {
            return Err(Error::BadArgument(
                "--devices needs at least one GPU".into(),
            ));
        }
    }
    match a.ranks {
        Some(0) => return Err(Error::ZeroRanks),
        Some(n) if n > ringreduce::engine::MAX_RANKS => {
            return Err(Error::TooManyRanks {
                ranks: n,
                max: ringreduce::engine::MAX_RANKS,
            })
        }
        _ => {}
    }
    if let Some(t) = a.timeout {
        ringreduce::param::timeout_arg("--timeout", t)?;
    }
    // --devices picks GPUs: refused where none is used.
    if let (Some(_), Some(why)) = (&a.devices, a.backend.cpu_reason()) {
        return Err(Error::BadArgument(format!(
            "--devices picks GPUs, but topo runs without one here ({why}): leave --devices out"
        )));
    }
    out("# ringreduce topo")?;
    match a.backend {
        BackendChoice::Cpu => cpu_dry_run(&a, bytes as usize),
        _ => match super::cuda::probe() {
            #[cfg(feature = "cuda")]
            Ok(info) => gpus(&a, info, bytes as usize),
            Err(why) if a.backend == BackendChoice::Auto => {
                out(format!("no CUDA driver: {why}"))?;
                cpu_facts()?;
                if let Some(n) = a.ranks {
                    out(format!(
                        "\nring order: rank r sends to rank (r+1) mod {n}; without a GPU every rank is a host thread, so every order is the same"
                    ))?;
                }
                out("(ringreduce topo --backend cpu runs the measurements on two host ranks, as a dry run)")?;
                Ok(true)
            }
            Err(why) => Err(Error::NoCuda(why)),
        },
    }
}

fn cpu_facts() -> Result<()> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    out(format!("CPU: {threads} hardware threads"))?;
    if let Some((avail, total)) = ringreduce::os::host_memory() {
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        out(format!(
            "host memory: {:.1} GiB available of {:.1} GiB",
            gib(avail),
            gib(total)
        ))?;
    }
    out("the CPU backend runs every rank as a host thread with its own buffers; a \"peer copy\" is a memcpy between them and the ring order is rank order")?;
    Ok(())
}

/// The engine's configuration for a pair of endpoints.
fn config(base: &EngineConfig, devices: Option<Vec<usize>>, ranks: usize) -> EngineConfig {
    let mut cfg = base.clone();
    cfg.ranks = ranks;
    cfg.devices = devices;
    cfg
}

/// GB/s of `plan` moving `bytes` per copy: median of 3 blocks of `iters`
/// back-to-back calls (after 2 untimed ones).
fn bandwidth(core: &mut Engine, plan: &Arc<Plan>, bytes: usize, iters: usize) -> Result<f64> {
    let bind = Arc::new(vec![Binding::DEFAULT; core.ranks()]);
    for _ in 0..2 {
        core.launch_plan(plan.clone(), DataType::Float, bind.clone())?;
    }
    core.synchronize()?;
    let mut v = Vec::new();
    for _ in 0..3 {
        let t0 = Instant::now();
        for _ in 0..iters {
            core.launch_plan(plan.clone(), DataType::Float, bind.clone())?;
        }
        core.synchronize()?;
        v.push(t0.elapsed().as_secs_f64() * 1e6 / iters as f64);
    }
    let us = median(v);
    Ok(if us > 0.0 {
        bytes as f64 / (us * 1e3)
    } else {
        0.0
    })
}

/// (host µs, device µs) of a tiny copy plan: medians of `iters` synchronized
/// calls, untimed for the host round trip, then timed for the copy's own
/// duration between its timing events.
fn latency(core: &mut Engine, plan: &Arc<Plan>, iters: usize) -> Result<(f64, Option<f64>)> {
    let bind = Arc::new(vec![Binding::DEFAULT; core.ranks()]);
    for _ in 0..3 {
        core.launch_plan(plan.clone(), DataType::Float, bind.clone())?;
    }
    core.synchronize()?;
    let mut host = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t0 = Instant::now();
        core.launch_plan(plan.clone(), DataType::Float, bind.clone())?;
        core.synchronize()?;
        host.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    core.take_timeline()?;
    core.set_timing(true)?;
    let timed = (|| -> Result<()> {
        for _ in 0..iters {
            core.launch_plan(plan.clone(), DataType::Float, bind.clone())?;
            core.synchronize()?;
        }
        Ok(())
    })();
    let off = core.set_timing(false);
    timed?;
    off?;
    // The copy op: (rank, index) of the plan's only copy.
    let copy = plan.ops.iter().enumerate().find_map(|(r, ops)| {
        ops.iter()
            .position(|op| matches!(op.kind, OpKind::Copy { .. }))
            .map(|i| (r, i))
    });
    let device: Vec<f64> = match copy {
        Some((r, i)) => core
            .take_timeline()?
            .iter()
            .flat_map(|c| c.ops.iter())
            .filter(|t| t.rank == r && t.op == i)
            .map(|t| (t.end_ns - t.start_ns) / 1e3)
            .collect(),
        None => Vec::new(),
    };
    Ok((median(host), (!device.is_empty()).then(|| median(device))))
}

/// Measure everything between the two ranks of `core` (endpoints `i`, `j`
/// of `m`), and the device-local copies of both.
fn measure_pair(
    core: &mut Engine,
    (i, j): (usize, usize),
    m: &mut [Vec<Cell>],
    bytes: usize,
    a: &TopoArgs,
) -> Result<()> {
    let count = bytes / 4;
    let n = core.ranks();
    core.reserve(BufId::SEND, &vec![bytes; n])?;
    let ends: Vec<(usize, usize, usize, usize)> = if n == 1 {
        vec![(0, 0, i, i)]
    } else {
        vec![(0, 1, i, j), (1, 0, j, i), (0, 0, i, i), (1, 1, j, j)]
    };
    for (from, to, ei, ej) in ends {
        if m[ei][ej].one_way.is_some() {
            continue;
        }
        let plan = Arc::new(probe::peer_copy_one_way(n, count, 4, from, to));
        let gbps = bandwidth(core, &plan, bytes, a.iters)?;
        let tiny = Arc::new(probe::peer_copy_one_way(n, 1, 4, from, to));
        let (host, device) = latency(core, &tiny, a.latency_iters)?;
        m[ei][ej] = Cell {
            one_way: Some(gbps),
            host_us: Some(host),
            device_us: device,
            ..m[ei][ej]
        };
        crate::note!("topo: {ei} -> {ej}: {gbps:.1} GB/s, 4 B in {host:.1} us");
    }
    if n == 2 {
        let plan = Arc::new(probe::peer_copy(2, count, 4, 1));
        let gbps = bandwidth(core, &plan, bytes, a.iters)?;
        m[i][j].both = Some(gbps);
        m[j][i].both = Some(gbps);
    }
    Ok(())
}

/// A matrix of one field, rows and columns named.
fn matrix(names: &[String], m: &[Vec<Cell>], f: impl Fn(&Cell) -> Option<String>) -> Result<()> {
    let w = names.iter().map(String::len).max().unwrap_or(4).max(8) + 2;
    let mut head = format!("{:<w$}", "from\\to");
    for n in names {
        head.push_str(&format!("{n:>w$}"));
    }
    out(head)?;
    for (r, row) in m.iter().enumerate() {
        let mut l = format!("{:<w$}", names[r]);
        for c in row {
            l.push_str(&format!("{:>w$}", f(c).unwrap_or_else(|| "-".into())));
        }
        out(l)?;
    }
    Ok(())
}

/// Measure between every pair of `names.len()` endpoints; `engine(i, j)`
/// builds the engine for a pair (i == j: one rank).
fn measure_all(
    names: &[String],
    bytes: usize,
    a: &TopoArgs,
    engine: impl Fn(usize, usize) -> Result<Engine>,
) -> Result<Vec<Vec<Cell>>> {
    let k = names.len();
    let mut m = vec![vec![Cell::default(); k]; k];
    if k == 1 {
        let mut core = engine(0, 0)?;
        measure_pair(&mut core, (0, 0), &mut m, bytes, a)?;
    }
    for i in 0..k {
        for j in i + 1..k {
            let mut core = engine(i, j)?;
            measure_pair(&mut core, (i, j), &mut m, bytes, a)?;
        }
    }
    Ok(m)
}

fn print_measurements(names: &[String], m: &[Vec<Cell>], bytes: usize, how: &str) -> Result<()> {
    out(format!(
        "\npeer-copy bandwidth, one direction alone (GB/s; {} per copy, {how}, one copy stream; the diagonal: a copy within one device):",
        format_bytes(bytes as u64)
    ))?;
    matrix(names, m, |c| c.one_way.map(|g| format!("{g:.1}")))?;
    out("\nboth directions at once (GB/s per direction; each side copies into the other on one copy stream):")?;
    matrix(names, m, |c| c.both.map(|g| format!("{g:.1}")))?;
    out("\nlatency of a 4-byte copy (us, median): launch + synchronize seen by the host")?;
    matrix(names, m, |c| c.host_us.map(|u| format!("{u:.1}")))?;
    out("\nlatency of a 4-byte copy (us, median): the copy alone, between its timing events")?;
    matrix(names, m, |c| c.device_us.map(|u| format!("{u:.2}")))?;
    Ok(())
}

fn cpu_dry_run(a: &TopoArgs, bytes: usize) -> Result<bool> {
    out("backend: cpu (a dry run: two host ranks, memcpy between their buffers; no GPU is used)")?;
    cpu_facts()?;
    if a.no_measure {
        return Ok(true);
    }
    check_host_memory(
        6 * bytes as u128,
        "the copy probes (send and scratch buffers of two ranks)",
    )?;
    let base = Common {
        ranks: Some(2),
        backend: BackendChoice::Cpu,
        devices: None,
        timeout: a.timeout,
    }
    .config()?;
    let names = vec!["host0".to_string(), "host1".to_string()];
    let m = measure_all(&names, bytes, a, |_, _| Engine::new(config(&base, None, 2)))?;
    print_measurements(
        &names,
        &m,
        bytes,
        "memcpy by the rank threads, median of 3 blocks",
    )?;
    let ranks = a.ranks.unwrap_or(2);
    out(format!(
        "\nring order: rank r sends to rank (r+1) mod {ranks}; on the CPU every rank is a host thread, so every order is the same"
    ))?;
    Ok(true)
}

#[cfg(feature = "cuda")]
fn gpus(a: &TopoArgs, info: &ringreduce::cuda::DriverInfo, bytes: usize) -> Result<bool> {
    let all: Vec<usize> = info.devices.iter().map(|d| d.ordinal).collect();
    let devs: Vec<usize> = match &a.devices {
        Some(d) => {
            if let Some(bad) = d.iter().find(|x| !all.contains(x)) {
                return Err(Error::NoCuda(format!(
                    "GPU {bad} requested but only {} present",
                    all.len()
                )));
            }
            // The order given, each GPU once.
            let mut v: Vec<usize> = Vec::new();
            for &x in d {
                if !v.contains(&x) {
                    v.push(x);
                }
            }
            v
        }
        None => all,
    };
    out(format!("driver: CUDA driver API {}", info.version))?;
    for &d in &devs {
        if let Some(g) = info.devices.iter().find(|x| x.ordinal == d) {
            out(format!(
                "GPU {d}: {}, {}, {} SMs, compute capability {}.{}, PCI {}",
                g.name,
                format_bytes(g.total_mem as u64),
                g.sms,
                g.cc.0,
                g.cc.1,
                g.pci
            ))?;
        }
    }
    let names: Vec<String> = devs.iter().map(|d| format!("GPU{d}")).collect();
    out("\nlinks, from row to column (the driver's cuDeviceGetP2PAttribute): peer access / performance rank (0 is the best) / native atomics")?;
    let mut ranks_seen = Vec::new();
    {
        let w = 20;
        let mut head = format!("{:<10}", "from\\to");
        for n in &names {
            head.push_str(&format!("{n:>w$}"));
        }
        out(head)?;
        for &x in &devs {
            let mut l = format!("{:<10}", format!("GPU{x}"));
            for &y in &devs {
                let cell = if x == y {
                    "-".to_string()
                } else {
                    match ringreduce::cuda::p2p_info(x, y) {
                        Ok(p) => {
                            ranks_seen.push((x, y, p));
                            format!(
                                "{} / {} / {}",
                                if p.access { "yes" } else { "NO" },
                                p.perf_rank,
                                if p.native_atomics { "yes" } else { "no" }
                            )
                        }
                        Err(e) => format!("error: {}", e.call),
                    }
                };
                l.push_str(&format!("{cell:>w$}"));
            }
            out(l)?;
        }
    }
    if !a.no_measure {
        let base = Common {
            ranks: Some(2),
            backend: BackendChoice::Cuda,
            devices: None,
            timeout: a.timeout,
        }
        .config()?;
        let m = measure_all(&names, bytes, a, |i, j| {
            let (ranks, d) = if i == j {
                (1, vec![devs[i]])
            } else {
                (2, vec![devs[i], devs[j]])
            };
            Engine::new(config(&base, Some(d), ranks))
        })?;
        print_measurements(
            &names,
            &m,
            bytes,
            "cuMemcpyPeerAsync issued by the engine, wall time of back-to-back copies, median of 3 blocks",
        )?;
    }
    ring_order(a, &devs, &ranks_seen)?;
    Ok(true)
}

/// The ring the engine builds over `devs` and why.
#[cfg(feature = "cuda")]
fn ring_order(
    a: &TopoArgs,
    devs: &[usize],
    links: &[(usize, usize, ringreduce::cuda::P2pInfo)],
) -> Result<()> {
    let n = a.ranks.unwrap_or(devs.len()).max(1);
    let map = ringreduce::backend::placement(n, devs);
    out(format!(
        "\nring order: {n} ranks on {} GPUs ({}): {}",
        devs.len(),
        if n <= devs.len() {
            "rank r on the r-th GPU listed"
        } else {
            "more ranks than GPUs: in blocks, rank r on GPU devices[r * GPUs / ranks]"
        },
        map.iter()
            .enumerate()
            .map(|(r, d)| format!("{r}->GPU{d}"))
            .collect::<Vec<_>>()
            .join(" ")
    ))?;
    let mut hops = Vec::new();
    for r in 0..n {
        let (x, y) = (map[r], map[(r + 1) % n]);
        let what = if n == 1 {
            "itself".to_string()
        } else if x == y {
            "same GPU: a device-local copy".to_string()
        } else {
            match links.iter().find(|l| l.0 == x && l.1 == y) {
                Some((_, _, p)) => format!("perf rank {}", p.perf_rank),
                None => "?".into(),
            }
        };
        hops.push(format!("{r}->{} (GPU{x}->GPU{y}, {what})", (r + 1) % n));
    }
    out(format!("ring hops: {}", hops.join(", ")))?;
    let mut perf: Vec<i32> = links.iter().map(|l| l.2.perf_rank).collect();
    perf.sort_unstable();
    perf.dedup();
    let why = match (devs.len(), perf.as_slice()) {
        (1, _) => "why: one GPU, so every hop is a copy within it and the order does not matter".to_string(),
        (_, [p]) if links.iter().all(|l| l.2.access) => format!(
            "why: every pair of these GPUs has peer access and the same P2P performance rank ({p}): a full mesh (NVLink/NVSwitch, or equal PCIe paths), so every ring order over distinct GPUs crosses equally good links"
        ),
        _ => format!(
            "why: the pairs' P2P performance ranks differ ({perf:?}) or some lack peer access: a ring that avoids the worst links could be faster, but the engine does not reorder ranks by topology yet; it keeps the order of the GPUs listed (the engine refuses pairs without peer access)"
        ),
    };
    out(why)?;
    if n > devs.len() {
        let local = (0..n).filter(|&r| map[r] == map[(r + 1) % n]).count();
        out(format!(
            "{n} ranks on {} GPUs: {} of the {n} hops cross between GPUs and {local} stay within one (a device-local copy); each GPU's ranks share its links and copy engines. The busiest link direction carries {} hop(s) of 2(N-1)/N*D each: blocks keep it at one (round-robin would make every hop cross)",
            devs.len(),
            n - local,
            crate::theory::ring_link_load(&map)
        ))?;
    }
    Ok(())
}
