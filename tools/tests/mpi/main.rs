//! Several nodes on one machine, over MPI: `mpirun -np 4` as 2 nodes x 2
//! ranks (`RINGREDUCE_RANKS_PER_NODE=2`) on the CPU backend, Open MPI over
//! TCP on loopback. Ranks of different nodes share no memory and no
//! segment: everything between them goes through the network transport.
//!
//! * the flat ring and `hier:2`: every collective, data type and op each
//!   path runs, in and out of place, exact inputs, bitwise checks
//!   (`soak --every`);
//! * `hier:2:mpi`, each rail's all-reduce handed to MPI's own collective:
//!   every type MPI has and every op, bitwise, and its refusals;
//! * the bytes each rank sent to the other node, counted by the engine,
//!   equal 2(K-1)/K x D/G for `hier:2` (`run`);
//! * a rank killed mid-collective and a rank that never joins end the job
//!   with an error, within a bound, leaving no process behind (under
//!   mpirun's default teardown, and under `--enable-recovery`, where the
//!   survivors must end by themselves, naming the failure).
//!
//! Skipped, saying so (`SKIPPED: <reason>`), without the `mpi` feature or
//! without Open MPI's `mpirun`: `cargo test -p ringreduce-tools
//! --no-default-features --features mpi --test mpi`.
//!
//! The same cases run on the CUDA backend (the host-staged network hop,
//! CUDA IPC inside a node) with `RR_MPI_BACKEND=cuda`, and against a
//! binary elsewhere with `RR_MPI_BIN=path` (the GPU machine runs the
//! staged binaries: `scripts/gpu-check.sh mpi`).

#[path = "../support/procs.rs"]
mod procs;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ringreduce");

/// The binary the ranks run (`RR_MPI_BIN`, else the one cargo built).
fn bin() -> String {
    std::env::var("RR_MPI_BIN").unwrap_or_else(|_| BIN.to_string())
}

/// The backend under test (`RR_MPI_BACKEND`: cpu, the default, or cuda).
fn backend() -> String {
    std::env::var("RR_MPI_BACKEND").unwrap_or_else(|_| "cpu".to_string())
}

/// `args` with `{b}` replaced by the backend under test, split on spaces.
fn words(args: &str) -> Vec<String> {
    args.replace("{b}", &backend())
        .split(' ')
        .map(str::to_string)
        .collect()
}

/// The longest a job of this test may take before it counts as a hang.
const LIMIT: Duration = Duration::from_secs(120);

fn tag(name: &str) -> String {
    format!(
        "{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
    )
}

/// Pids of the live processes carrying `RR_MPI_TEST=<tag>` (mpirun, its
/// daemons' children, the ranks).
fn tagged(tag: &str) -> Vec<u32> {
    let want = format!("RR_MPI_TEST={tag}");
    let mut v = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return v;
    };
    for e in dir.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if !env.split(|&b| b == 0).any(|l| l == want.as_bytes()) {
            continue;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|s| s.split_whitespace().next());
        if !matches!(state, Some("Z") | Some("X") | None) {
            v.push(pid);
        }
    }
    v
}

/// Wait up to `limit` until no tagged process is left; panic naming them
/// (see `procs::wait_gone`).
fn assert_none_left(tag: &str, limit: Duration) {
    procs::wait_gone(tag, limit, || tagged(tag));
}

/// What a job printed: mpirun's own output, and each rank's stdout and
/// stderr (mpirun's `--output-filename`: one file per rank and stream, so
/// the lines of different ranks never interleave).
struct Job {
    status: std::process::ExitStatus,
    took: Duration,
    /// mpirun's stdout and stderr.
    out: String,
    err: String,
    dir: OutputDir,
}

/// A job's output directory, removed when dropped: after a passing test,
/// a failing one, and a hang (the panic unwinds through it).
struct OutputDir(std::path::PathBuf);

impl Drop for OutputDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The most a job may write, all files together. A job over it is killed
/// and fails the test: Open MPI, polled on a connection to a dead process,
/// can print one line per poll (once 5.4 GB in two minutes, which filled
/// the disk).
const OUTPUT_CAP: u64 = 64 << 20;

/// What one file may show in a test's message: its head and its tail.
const SHOWN: usize = 32 << 10;

/// `path` as text, at most [`SHOWN`] bytes from each end.
fn read_capped(path: &std::path::Path) -> String {
    let Ok(bytes) = std::fs::read(path) else {
        return String::new();
    };
    if bytes.len() <= 2 * SHOWN {
        return String::from_utf8_lossy(&bytes).into_owned();
    }
    format!(
        "{}\n[... {} bytes left out ...]\n{}",
        String::from_utf8_lossy(&bytes[..SHOWN]),
        bytes.len() - 2 * SHOWN,
        String::from_utf8_lossy(&bytes[bytes.len() - SHOWN..])
    )
}

/// Bytes under `dir`, every file at any depth.
fn bytes_under(dir: &std::path::Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => bytes_under(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

impl Job {
    /// Rank `r`'s `stream` (`stdout` or `stderr`).
    fn rank(&self, r: usize, stream: &str) -> String {
        read_capped(&self.dir.0.join(format!("1/rank.{r}/{stream}")))
    }

    /// Everything, for an assertion's message.
    fn all(&self) -> String {
        let mut s = format!("mpirun: {:?}\n{}\n{}", self.status, self.out, self.err);
        for r in 0..4 {
            s += &format!(
                "\n-- rank {r}:\n{}{}",
                self.rank(r, "stdout"),
                self.rank(r, "stderr")
            );
        }
        s
    }
}

/// `mpirun -np 4` as 2 nodes of 2 ranks, over TCP on loopback, each rank
/// running `ringreduce <args>`; `recovery`: `--enable-recovery` (mpirun
/// does not tear the job down when a rank dies).
fn mpirun(tag: &str, args: &[String], env: &[(&str, &str)], recovery: bool) -> Job {
    let dir = std::env::temp_dir().join(format!("rr-mpi-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    let mut c = Command::new("mpirun");
    c.args(["--oversubscribe", "-np", "4"])
        .arg("--output-filename")
        .arg(&dir)
        .args([
            "--mca",
            "btl",
            "tcp,self",
            "--mca",
            "btl_tcp_if_include",
            "lo",
        ])
        .args(["-x", "RINGREDUCE_RANKS_PER_NODE=2", "-x", "RR_MPI_TEST"])
        .env("RR_MPI_TEST", tag)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env_remove("RINGREDUCE_FAULT")
        .stdin(Stdio::null());
    if recovery {
        c.arg("--enable-recovery");
    }
    for (k, v) in env {
        c.args(["-x", &format!("{k}={v}")]);
    }
    if let Some(base) = nodes_shm() {
        // Each rank in a mount namespace of its own whose /dev/shm is its
        // node's directory: the ranks of a node share one, the nodes
        // share none.
        c.args(["-x", &format!("RR_MPI_NODES={}", base.display())])
            .args(["unshare", "-m", "sh", "-c", NODE_SHM, "sh"]);
    }
    c.arg(bin()).args(args);
    // mpirun's own output goes to files, so that a job that does not end
    // is killed at the limit (a hang fails the test, it never hangs it).
    std::fs::create_dir_all(&dir).expect("output directory");
    let dir = OutputDir(dir);
    let (out, err) = (dir.0.join("mpirun.out"), dir.0.join("mpirun.err"));
    c.stdout(std::fs::File::create(&out).expect("mpirun.out"))
        .stderr(std::fs::File::create(&err).expect("mpirun.err"));
    let t0 = Instant::now();
    let mut child = c.spawn().expect("mpirun runs");
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for mpirun") {
            break s;
        }
        let hung = t0.elapsed() > LIMIT;
        let runaway = bytes_under(&dir.0) > OUTPUT_CAP;
        if hung || runaway {
            let _ = child.kill();
            let _ = child.wait();
            for p in tagged(tag) {
                let _ = Command::new("kill").arg("-9").arg(p.to_string()).status();
            }
            let why = if hung {
                format!("did not end within {LIMIT:?}: a hang")
            } else {
                format!("wrote more than {OUTPUT_CAP} bytes of output")
            };
            let mut shown = read_capped(&err);
            for r in 0..4 {
                shown += &format!(
                    "\n-- rank {r} stderr:\n{}",
                    read_capped(&dir.0.join(format!("1/rank.{r}/stderr")))
                );
            }
            panic!("mpirun {args:?} {why}\n{shown}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Job {
        status,
        took: t0.elapsed(),
        out: read_capped(&out),
        err: read_capped(&err),
        dir,
    }
}

fn every_type_op_and_collective_on_ring_and_hier() {
    let t = tag("every");
    let args = words("soak --every --backend {b} --algo ring,hier:2 --max-size 4KiB --timeout 30");
    let j = mpirun(&t, &args, &[], false);
    assert!(j.status.success(), "{}", j.all());
    // Every rank checks every result (a wrong one fails its exit status);
    // rank 0 reports.
    let r0 = j.rank(0, "stdout");
    assert!(r0.contains("PASS: 0 wrong of 384 calls"), "{}", j.all());
    assert!(r0.contains("path hier:2: 120 calls"), "{r0}");
    assert!(r0.contains("path ring: 264 calls"), "{r0}");
    for l in r0
        .lines()
        .filter(|l| l.contains("--every") || l.starts_with("path") || l.contains("PASS"))
    {
        println!("    {l}");
    }
    assert_none_left(&t, Duration::from_secs(5));
}

fn random_calls_and_auto_over_the_network() {
    // auto (half the draws) takes only paths that push over nodes.
    let t = tag("soak");
    let args = words("soak --backend {b} --algo ring,hier:2,ring:pipe4,ring:naive --calls 200 --max-size 64KiB --seed 7 --timeout 30");
    let j = mpirun(&t, &args, &[], false);
    assert!(j.status.success(), "{}", j.all());
    let r0 = j.rank(0, "stdout");
    assert!(r0.contains("PASS: 0 wrong of 200 calls"), "{}", j.all());
    println!(
        "    {}",
        r0.lines().find(|l| l.contains("PASS")).unwrap_or("")
    );
    assert_none_left(&t, Duration::from_secs(5));
}

fn hier_sends_its_share_across_the_network() {
    // D = 1 MiB, K = 2 nodes of G = 2: 2(K-1)/K x D/G = 524288 bytes.
    for (algo, want) in [
        ("hier:2", "[524288, 524288, 524288, 524288] (measured, first call); hier formula 2(K-1)/K*D/G = 524288 B (K = 2 nodes of G = 2 ranks)"),
        // The flat ring: the last rank of each node sends 2(N-1)/N x D
        // across, the others nothing.
        ("ring", "[0, 1572864, 0, 1572864] (measured, first call)"),
    ] {
        let t = tag("bytes");
        let args = words(&format!(
            "run --backend {{b}} --algo {algo} --size 1MiB --inputs exact --iters 3 --timeout 30"
        ));
        let j = mpirun(&t, &args, &[], false);
        assert!(j.status.success(), "{}", j.all());
        let r0 = j.rank(0, "stdout");
        assert!(r0.contains("on 2 nodes"), "{r0}");
        assert!(
            r0.contains(&format!("bytes sent to other nodes per rank {want}")),
            "{algo}:\n{r0}"
        );
        assert!(
            r0.contains("check     : PASS (0 wrong of 1048576 elements on 4 ranks, bitwise"),
            "{r0}"
        );
        for line in r0.lines().filter(|l| {
            l.starts_with("network") || l.starts_with("check") || l.starts_with("backend")
        }) {
            println!("    {algo}: {line}");
        }
        assert_none_left(&t, Duration::from_secs(5));
    }
    // Copies longer than one message (RINGREDUCE_NET_MESSAGE_MAX): sent
    // as several, in order, with the same bytes and the same result.
    let t = tag("bytes-pieces");
    let args =
        words("run --backend {b} --algo hier:2 --size 1MiB --inputs exact --iters 3 --timeout 30");
    let j = mpirun(&t, &args, &[("RINGREDUCE_NET_MESSAGE_MAX", "4KiB")], false);
    assert!(j.status.success(), "{}", j.all());
    let r0 = j.rank(0, "stdout");
    assert!(
        r0.contains("bytes sent to other nodes per rank [524288, 524288, 524288, 524288]"),
        "{r0}"
    );
    assert!(
        r0.contains("check     : PASS (0 wrong of 1048576 elements on 4 ranks, bitwise"),
        "{r0}"
    );
    println!("    hier:2 in messages of 4 KiB: PASS, 524288 B per rank across");
    assert_none_left(&t, Duration::from_secs(5));
    // A size one MPI message cannot carry is refused at once, by name.
    let t = tag("bytes-toolong");
    let j = mpirun(&t, &args, &[("RINGREDUCE_NET_MESSAGE_MAX", "3GiB")], false);
    assert!(!j.status.success(), "{}", j.all());
    assert!(
        j.all().contains("RINGREDUCE_NET_MESSAGE_MAX"),
        "{}",
        j.all()
    );
    assert!(j.took < Duration::from_secs(30), "took {:?}", j.took);
    assert_none_left(&t, Duration::from_secs(5));
    // A layout the plan does not assume (one rank per node under hier:2):
    // every hop crosses a node, and the formula is not printed as if it
    // held (it printed 524288 B beside 1.5 MiB measured).
    let t = tag("bytes-layout");
    let args = words("run --backend {b} --algo hier:2 --size 1MiB --iters 3 --timeout 30");
    let j = mpirun(&t, &args, &[("RINGREDUCE_RANKS_PER_NODE", "1")], false);
    assert!(j.status.success(), "{}", j.all());
    let r0 = j.rank(0, "stdout");
    assert!(r0.contains("on 4 nodes"), "{r0}");
    assert!(
        r0.contains("the hier formula does not apply: the plan groups G = 2 ranks per node, this job has 1 per node"),
        "{r0}"
    );
    assert_none_left(&t, Duration::from_secs(5));
}

/// `hier:2:mpi`: each rail's all-reduce handed to MPI's own
/// `MPI_Iallreduce` on the rail's communicator. Every type MPI has and
/// every op (the pre- and post-ops of `avg` applied around MPI's sum), in
/// and out of place, bitwise; a type MPI lacks and a layout whose rails are
/// not the plan's are refused by name. CPU backend only: the CUDA backend
/// refuses the path before any call (its own unit test).
fn the_rails_all_reduce_through_mpi() {
    if backend() != "cpu" {
        println!("    SKIPPED: hier:2:mpi runs on host memory only");
        return;
    }
    let t = tag("rail");
    let args = words("soak --every --backend {b} --algo hier:2:mpi -d int8,uint8,int32,uint32,int64,uint64,float,double -o all --max-size 4KiB --timeout 30");
    let j = mpirun(&t, &args, &[], false);
    assert!(j.status.success(), "{}", j.all());
    let r0 = j.rank(0, "stdout");
    assert!(r0.contains("PASS: 0 wrong of 80 calls"), "{}", j.all());
    for l in r0
        .lines()
        .filter(|l| l.starts_with("path") || l.contains("PASS"))
    {
        println!("    {l}");
    }
    assert_none_left(&t, Duration::from_secs(5));
    // `run` says where the bytes between nodes went (MPI's, not counted).
    let t = tag("rail-run");
    let args = words(
        "run --backend {b} --algo hier:2:mpi --size 1MiB --inputs exact --iters 3 --timeout 30",
    );
    let j = mpirun(&t, &args, &[], false);
    assert!(j.status.success(), "{}", j.all());
    let r0 = j.rank(0, "stdout");
    assert!(
        r0.contains(
            "every byte between nodes went through the rails' MPI collective (MPI_Iallreduce;"
        ),
        "{r0}"
    );
    assert!(
        r0.contains("check     : PASS (0 wrong of 1048576 elements on 4 ranks, bitwise"),
        "{r0}"
    );
    assert_none_left(&t, Duration::from_secs(5));
    // Types the rail does not hand to MPI's reduction, which it gathers and
    // reduces itself, bitwise as on one machine (and two it does): those MPI has no datatype
    // for (it refused them by name, and `auto` over nodes, which takes this
    // path on host memory, failed on them), and the 8-bit integers, whose
    // sums Open MPI 4.1's vectorized reduction saturates (127 for 100 +
    // 100). Random inputs overflow (exact ones are chosen not to), and
    // 64 KiB is past the vector loop's threshold: the 8-bit rows went wrong
    // here before. The unsigned min and max go to MPI: random inputs above
    // the signed range catch a library that compares them signed (Open MPI
    // 4.1.4 did for some builds, open-mpi/ompi#10648).
    for (d, op, size, inputs) in [
        ("bfloat16", "sum", "4KiB", "exact"),
        ("half", "avg", "4KiB", "exact"),
        ("f8e4m3", "max", "4KiB", "exact"),
        ("int8", "sum", "64KiB", "random"),
        ("uint8", "sum", "64KiB", "random"),
        ("int8", "avg", "64KiB", "random"),
        ("uint64", "min", "64KiB", "random"),
        ("uint32", "max", "64KiB", "random"),
    ] {
        let t = tag(&format!("rail-{d}-{op}"));
        let args = words(&format!(
            "run --backend {{b}} --algo hier:2:mpi -d {d} -o {op} --size {size} --inputs {inputs} --iters 2 --timeout 30"
        ));
        let j = mpirun(&t, &args, &[], false);
        assert!(j.status.success(), "{d} {op}: {}", j.all());
        assert!(
            j.rank(0, "stdout").contains("check     : PASS"),
            "{d} {op}: {}",
            j.all()
        );
        assert_none_left(&t, Duration::from_secs(5));
    }
    // One rank per node: the rails of hier:2 are not this job's.
    let t = tag("rail-layout");
    let args = words("run --backend {b} --algo hier:2:mpi --size 4KiB --iters 1 --timeout 30");
    let j = mpirun(&t, &args, &[("RINGREDUCE_RANKS_PER_NODE", "1")], false);
    assert!(!j.status.success(), "{}", j.all());
    assert!(
        j.all().contains("the job's nodes have 1 ranks"),
        "{}",
        j.all()
    );
    assert_none_left(&t, Duration::from_secs(5));
}

/// `bench` over nodes, with its peer-copy ceiling probe (issue 45: it hung
/// at the first call after the probe, 5 runs of 5: the probe's plan, freed,
/// gave its address to that call's plan, and the network transport's
/// forwarding tables, cached by plan address, were the probe's), and
/// `trace` over nodes.
fn bench_and_trace_over_nodes() {
    let t = tag("bench");
    let args = words("bench --backend {b} -b 8 -e 1KiB --algo auto,ring,hier:2 --timeout 30");
    let j = mpirun(&t, &args, &[], false);
    assert!(j.status.success(), "{}", j.all());
    let r0 = j.rank(0, "stdout");
    assert!(r0.contains("peer-copy ceiling"), "the probe ran: {r0}");
    assert!(r0.contains("1KiB"), "every size ran: {r0}");
    assert!(!r0.contains("MISMATCH") && !r0.contains("FAIL"), "{r0}");
    // On host memory `auto` over nodes hands each rail's phase to MPI.
    if backend() == "cpu" {
        let auto: Vec<&str> = r0
            .lines()
            .filter(|l| l.starts_with("# row") && l.contains(" auto "))
            .collect();
        assert!(
            !auto.is_empty() && auto.iter().all(|l| l.trim_end().ends_with("hier:2:mpi")),
            "{r0}"
        );
    }
    if let Some(l) = r0.lines().find(|l| l.contains("peer-copy ceiling")) {
        println!("    {}", l.trim());
    }
    assert_none_left(&t, Duration::from_secs(5));
    let t = tag("trace");
    let args = words("trace --backend {b} --algo hier:2 --count 8 --timeout 30");
    let j = mpirun(&t, &args, &[], false);
    assert!(j.status.success(), "{}", j.all());
    assert_none_left(&t, Duration::from_secs(5));
    // The rail's op over nodes is one collective of MPI's: its timeline
    // gives every part of the plan the op's interval, and the order check
    // passes (it reported each part "not timed").
    if backend() == "cpu" {
        let t = tag("trace-rail");
        let args =
            words("trace --backend {b} --algo hier:2:mpi --size 64KiB --calls 2 --timeout 30");
        let j = mpirun(&t, &args, &[], false);
        assert!(j.status.success(), "{}", j.all());
        let r0 = j.rank(0, "stdout");
        assert!(
            r0.contains("# order check: ") && r0.contains("every time follows the plan's order"),
            "{r0}"
        );
        assert!(!r0.contains("was not timed"), "{r0}");
        assert_none_left(&t, Duration::from_secs(5));
    }
}

/// `overlap` runs every rank in one process: under mpirun every rank
/// refuses at once, by name (it failed with "write into rank 0's buffer:
/// it lives in rank 0's process").
fn overlap_refuses_as_a_rank() {
    let t = tag("overlap");
    let args = words("overlap --backend {b} --timeout 30");
    let j = mpirun(&t, &args, &[], false);
    assert!(!j.status.success(), "{}", j.all());
    assert!(
        j.took < Duration::from_secs(20),
        "took {:?}: {}",
        j.took,
        j.all()
    );
    // mpirun aborts the job at the first rank that exits with an error, so
    // the others may be killed before they print: every rank that printed
    // an error printed this one, and at least one did.
    let mut told = 0;
    for r in 0..4 {
        let stderr = j.rank(r, "stderr");
        let Some(e) = stderr.lines().find(|l| l.starts_with("error:")) else {
            continue;
        };
        assert!(
            e.contains("overlap runs every rank in one process"),
            "rank {r}: {}",
            j.all()
        );
        assert!(
            e.contains(&format!("rank {r} of a job of 4")),
            "rank {r}: {e}"
        );
        told += 1;
    }
    assert!(told > 0, "no rank said why: {}", j.all());
    assert_none_left(&t, Duration::from_secs(5));
}

/// Rank `r`'s first error line.
fn error_line(j: &Job, r: usize) -> String {
    j.rank(r, "stderr")
        .lines()
        .find(|l| l.starts_with("error:"))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("rank {r} reports an error\n{}", j.all()))
}

fn a_rank_killed_mid_collective_ends_the_job() {
    for algo in algos_over_nodes() {
        a_rank_killed_mid_collective_ends_the_job_on(algo);
    }
}

/// The paths the fault cases run: `hier:2`, and on the CPU backend
/// `hier:2:mpi` (its survivors wait in `MPI_Iallreduce`, under the same
/// bound).
fn algos_over_nodes() -> Vec<&'static str> {
    match backend().as_str() {
        "cpu" => vec!["hier:2", "hier:2:mpi"],
        _ => vec!["hier:2"],
    }
}

fn a_rank_killed_mid_collective_ends_the_job_on(algo: &str) {
    println!("    {algo}:");
    let args = words(&format!(
        "run --backend {{b}} --algo {algo} --size 1MiB --iters 50 --timeout 20"
    ));
    let kill = [("RINGREDUCE_FAULT", "kill:rank=1:call=3")];
    // mpirun's own teardown: the job ends with the killed rank's status.
    let t = tag("kill");
    let j = mpirun(&t, &args, &kill, false);
    assert!(!j.status.success(), "{}", j.all());
    assert!(j.took < Duration::from_secs(15), "took {:?}", j.took);
    // mpirun names the killed rank, or a survivor that ended with its
    // error first (whichever it noticed first).
    assert!(
        j.err.contains("signal 9") || j.err.contains("non-zero status"),
        "{}",
        j.all()
    );
    assert_none_left(&t, Duration::from_secs(5));
    println!(
        "    mpirun's teardown: exit {:?} in {:.1} s",
        j.status.code(),
        j.took.as_secs_f64()
    );
    // No teardown: the survivors end by themselves, each naming rank 1
    // (ranks 2 and 3 are on the other node: the failure came over MPI).
    let t = tag("kill-recovery");
    let j = mpirun(&t, &args, &kill, true);
    assert!(
        j.took < Duration::from_secs(15),
        "took {:?}\n{}",
        j.took,
        j.all()
    );
    for r in [0, 2, 3] {
        let line = error_line(&j, r);
        assert!(
            line.contains("rank 1 failed: its process") && line.contains("died"),
            "rank {r} names rank 1: {line}"
        );
        println!("    --enable-recovery: rank {r}: {line}");
    }
    assert_none_left(&t, Duration::from_secs(5));
}

/// A whole node lost (both of node 1's ranks killed in the same call),
/// under `--enable-recovery` (no launcher teardown): nobody is left on that
/// node to tell the others, and MPI reports nothing for a send to a dead
/// process. The survivors notice the node's silence (its heartbeats stop;
/// 2.5 s with a 5 s timeout) and end before their timeout, each naming a
/// rank of node 1 as failed, none a survivor, never a hang.
fn a_whole_node_killed_ends_every_survivor() {
    for algo in algos_over_nodes() {
        a_whole_node_killed_ends_every_survivor_on(algo);
    }
}

fn a_whole_node_killed_ends_every_survivor_on(algo: &str) {
    println!("    {algo}:");
    let args = words(&format!(
        "run --backend {{b}} --algo {algo} --size 1MiB --iters 50 --timeout 5"
    ));
    let kill = [("RINGREDUCE_FAULT", "kill:rank=2:call=3,kill:rank=3:call=3")];
    let t = tag("kill-node");
    let before = stores();
    let j = mpirun(&t, &args, &kill, true);
    assert!(
        j.took < Duration::from_secs(20),
        "took {:?}\n{}",
        j.took,
        j.all()
    );
    let lines: Vec<String> = [0, 1].iter().map(|&r| error_line(&j, r)).collect();
    // Every survivor names a rank of the lost node as the failure: dead
    // (its pid, where the machine is shared) or silent (the heartbeats
    // stopped), before its own timeout would have ended it.
    for (r, line) in lines.iter().enumerate() {
        assert!(
            line.contains("rank 2 failed") || line.contains("rank 3 failed"),
            "rank {r} names a rank of node 1 as failed: {line}"
        );
        assert!(
            !line.contains("waited more than"),
            "rank {r} timed out: {line}"
        );
    }
    for (r, line) in lines.iter().enumerate() {
        assert!(
            !line.contains("rank 0 failed") && !line.contains("rank 1 failed"),
            "rank {r} blames a survivor: {line}"
        );
        println!("    --enable-recovery: rank {r}: {line}");
    }
    println!("    the job ended in {:.1} s", j.took.as_secs_f64());
    // Once the job failed and the other node was told, the receivers stop
    // polling MPI: Open MPI prints an error per poll of a connection to a
    // dead process (once 5.4 GB from one survivor).
    let written = bytes_under(&j.dir.0);
    assert!(written < 1 << 20, "the job wrote {written} B\n{}", j.all());
    assert_none_left(&t, Duration::from_secs(5));
    // The dead node's store is nobody's to remove: the next job's first
    // rank of a node removes it (its creator and ranks are all gone).
    let left: Vec<String> = stores().difference(&before).cloned().collect();
    let t = tag("after-kill-node");
    let j = mpirun(&t, &words("run --backend {b} --size 4KiB"), &[], false);
    assert!(j.status.success(), "{}", j.all());
    let still: Vec<&String> = left.iter().filter(|s| stores().contains(*s)).collect();
    assert!(
        still.is_empty(),
        "stale stores left: {still:?}\n{}",
        j.all()
    );
    println!(
        "    {} store(s) of the dead node removed by the next job",
        left.len()
    );
}

/// The job stores (`ringreduce-<uid>-...`) in every node's `/dev/shm`.
fn stores() -> std::collections::BTreeSet<String> {
    let dirs = match nodes_shm() {
        Some(base) => vec![base.join("node0"), base.join("node1")],
        None => vec!["/dev/shm".into()],
    };
    let mut v = std::collections::BTreeSet::new();
    for dir in dirs {
        let Ok(d) = std::fs::read_dir(&dir) else {
            continue;
        };
        v.extend(
            d.flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .filter(|n| n.starts_with("ringreduce-"))
                .map(|n| format!("{}/{n}", dir.display())),
        );
    }
    v
}

/// Run by each rank before the binary: bind its node's directory (rank
/// / 2) over `/dev/shm` in its own mount namespace (`unshare -m`).
const NODE_SHM: &str = r#"n=$((OMPI_COMM_WORLD_RANK / 2)); mount --bind "$RR_MPI_NODES/node$n" /dev/shm || exit 97; exec "$@""#;

/// The directory holding each node's `/dev/shm` (`node0`, `node1`), when
/// the nodes can be isolated: `unshare -m` works here (root, or a user
/// namespace) and `RR_MPI_SHARED_SHM` is not set. Else every rank shares
/// this machine's `/dev/shm`, as the nodes' ranks would on one machine
/// without namespaces (the network transport still carries everything
/// between nodes; the test says which it ran).
fn nodes_shm() -> Option<&'static std::path::Path> {
    static BASE: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    BASE.get_or_init(|| {
        if std::env::var_os("RR_MPI_SHARED_SHM").is_some() {
            return None;
        }
        let base = std::env::temp_dir().join(format!("rr-mpi-shm-{}", std::process::id()));
        for n in ["node0", "node1"] {
            let d = base.join(n);
            std::fs::create_dir_all(&d).ok()?;
            // World-writable and sticky, as /dev/shm is.
            let mode =
                <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o1777);
            std::fs::set_permissions(&d, mode).ok()?;
        }
        let probe = Command::new("unshare")
            .args([
                "-m",
                "sh",
                "-c",
                "mount --bind \"$0\" /dev/shm",
                &base.join("node0").to_string_lossy(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if probe.is_ok_and(|s| s.success()) {
            Some(base)
        } else {
            let _ = std::fs::remove_dir_all(&base);
            None
        }
    })
    .as_deref()
}

fn a_rank_that_never_joins_ends_the_job() {
    let args = words("run --backend {b} --algo hier:2 --size 64KiB --timeout 5");
    let nostart = [("RINGREDUCE_FAULT", "nostart:rank=2")];
    let t = tag("nostart");
    let j = mpirun(&t, &args, &nostart, false);
    assert_eq!(j.status.code(), Some(2), "{}", j.all());
    assert!(j.took < Duration::from_secs(15), "took {:?}", j.took);
    assert!(
        error_line(&j, 2).contains("injected failure before joining the job"),
        "{}",
        j.all()
    );
    assert_none_left(&t, Duration::from_secs(5));
    println!(
        "    mpirun's teardown: exit {:?} in {:.1} s",
        j.status.code(),
        j.took.as_secs_f64()
    );
    // No teardown: the others wait in MPI_Init for at most the timeout.
    let t = tag("nostart-recovery");
    let j = mpirun(&t, &args, &nostart, true);
    assert!(
        j.took < Duration::from_secs(20),
        "took {:?}\n{}",
        j.took,
        j.all()
    );
    for r in [0, 1, 3] {
        let line = error_line(&j, r);
        assert!(
            line.contains("waited more than 5 s") && line.contains("MPI_Init_thread"),
            "rank {r} times out: {line}"
        );
    }
    println!(
        "    --enable-recovery: ranks 0, 1 and 3 timed out in MPI_Init_thread; the job ended in {:.1} s",
        j.took.as_secs_f64()
    );
    assert_none_left(&t, Duration::from_secs(5));
}

/// Why the test cannot run here, if it cannot.
/// How the nodes' shared memory is set up, for the output.
fn shm_words() -> &'static str {
    if nodes_shm().is_some() {
        "each node with its own /dev/shm (a mount namespace per rank)"
    } else {
        "the nodes share this machine's /dev/shm (unshare -m not available, or RR_MPI_SHARED_SHM set)"
    }
}

fn skip_reason() -> Option<String> {
    if !cfg!(feature = "mpi") {
        return Some("built without the mpi feature (cargo test -p ringreduce-tools --no-default-features --features mpi --test mpi)".into());
    }
    match Command::new("mpirun").arg("--version").output() {
        Err(e) => Some(format!(
            "no mpirun ({e}); apt-get install openmpi-bin libopenmpi-dev"
        )),
        Ok(o) if !String::from_utf8_lossy(&o.stdout).contains("Open MPI") => {
            Some("mpirun is not Open MPI's (the test uses its flags)".into())
        }
        Ok(_) => None,
    }
}

fn main() {
    if let Some(why) = skip_reason() {
        println!("SKIPPED: {why}");
        return;
    }
    let tests: [(&str, fn()); 9] = [
        (
            "every_type_op_and_collective_on_ring_and_hier",
            every_type_op_and_collective_on_ring_and_hier,
        ),
        (
            "random_calls_and_auto_over_the_network",
            random_calls_and_auto_over_the_network,
        ),
        (
            "hier_sends_its_share_across_the_network",
            hier_sends_its_share_across_the_network,
        ),
        (
            "the_rails_all_reduce_through_mpi",
            the_rails_all_reduce_through_mpi,
        ),
        ("bench_and_trace_over_nodes", bench_and_trace_over_nodes),
        ("overlap_refuses_as_a_rank", overlap_refuses_as_a_rank),
        (
            "a_rank_killed_mid_collective_ends_the_job",
            a_rank_killed_mid_collective_ends_the_job,
        ),
        (
            "a_whole_node_killed_ends_every_survivor",
            a_whole_node_killed_ends_every_survivor,
        ),
        (
            "a_rank_that_never_joins_ends_the_job",
            a_rank_that_never_joins_ends_the_job,
        ),
    ];
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    println!("nodes: {}", shm_words());
    let mut ran = 0;
    for (name, f) in tests {
        if !filter.is_empty() && !filter.iter().any(|x| name.contains(x.as_str())) {
            continue;
        }
        println!("test {name} ...");
        let t0 = Instant::now();
        f();
        println!("test {name} ... ok ({:.1} s)", t0.elapsed().as_secs_f64());
        ran += 1;
    }
    if let Some(base) = nodes_shm() {
        let _ = std::fs::remove_dir_all(base);
    }
    println!(
        "test result: ok. {ran} passed (2 nodes x 2 ranks over Open MPI, TCP on loopback, {}, backend {})",
        shm_words(),
        backend()
    );
}
