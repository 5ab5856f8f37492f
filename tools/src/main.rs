//! The `ringreduce` command line: argument types and dispatch only; every
//! command lives in the tools crate's library ([`ringreduce_tools::cli`]).

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use ringreduce_tools::cli::{
    bench, check, compare, env, launch, overlap, run, soak, theory, topo, trace,
};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "ringreduce",
    version,
    about = "A hand-written Ring AllReduce engine (CPU and CUDA backends), checked against NCCL"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one collective and verify it against a CPU reference.
    Run(run::RunArgs),
    /// Print a small collective step by step, or a timeline of real calls
    /// (--timeline FILE.json, --svg FILE.svg, --backend).
    Trace(trace::TraceArgs),
    /// Parameter Server vs Ring, then every all-reduce algorithm: traffic and the alpha-beta-gamma time model.
    Theory(theory::TheoryArgs),
    /// Feed the same inputs to ringreduce and NCCL and compare every output.
    Check(check::CheckArgs),
    /// nccl-tests-style sweep: ringreduce's paths vs NCCL.
    Bench(bench::BenchArgs),
    /// Many random collectives, every result checked.
    Soak(soak::SoakArgs),
    /// Start N rank processes (one rank each) of a command: `launch -n 2 --
    /// bench ...`, like torchrun; returns the worst exit status.
    Launch(launch::LaunchArgs),
    /// Gradient buckets all-reduced while the next are computed: overlap
    /// and interference, ringreduce vs NCCL.
    Overlap(overlap::OverlapArgs),
    /// The GPUs, their links, measured peer-copy bandwidth and latency, and
    /// the ring order.
    Topo(topo::TopoArgs),
    /// Parameter server vs ring, measured: bytes per rank and time vs N.
    Compare(compare::CompareArgs),
    /// Every environment variable ringreduce reads: its value, where it
    /// came from, what it accepts (exit 2 naming any malformed one).
    Env(env::EnvArgs),
}

/// The command line parsed; a value clap cannot take is said with the flag,
/// what was typed and what is accepted (exit 2).
fn parse() -> Cli {
    // A negative number is a value, so that its flag's own check (or the
    // type's) says why it is refused, not "unexpected argument '-1'".
    let command = Cli::command().mut_subcommands(|c| c.allow_negative_numbers(true));
    let parsed = command
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m));
    match parsed {
        Ok(cli) => cli,
        Err(e) => {
            if let Some(text) = ringreduce_tools::cli::negative_value(&e) {
                ringreduce_tools::note!("error: {text}");
                std::process::exit(2);
            }
            e.exit()
        }
    }
}

fn main() -> ExitCode {
    let cli = parse();
    let r = match cli.cmd {
        // The worst exit status of the ranks.
        Cmd::Launch(a) => {
            return match launch::execute(a) {
                Ok(code) => ExitCode::from(code),
                Err(e) => {
                    ringreduce_tools::note!("launch: error: {e}");
                    ExitCode::from(2)
                }
            };
        }
        Cmd::Run(a) => run::execute(a),
        Cmd::Trace(a) => trace::execute(a),
        Cmd::Theory(a) => theory::execute(a),
        Cmd::Check(a) => check::execute(a),
        Cmd::Bench(a) => bench::execute(a),
        Cmd::Soak(a) => soak::execute(a),
        Cmd::Overlap(a) => overlap::execute(a),
        Cmd::Topo(a) => topo::execute(a),
        Cmd::Compare(a) => compare::execute(a),
        Cmd::Env(a) => env::execute(a),
    };
    // A rank thread left stuck in a driver call ends the process without
    // the CUDA driver's exit handler (it would wait for that thread).
    ringreduce_tools::cli::finish(match r {
        Ok(true) => 0,
        Ok(false) => 1,
        // A closed stdout (`| head`) with no output file pending ends the
        // command quietly, exit status 0; with output files pending the
        // command goes on quietly and its own status stands (see
        // `ringreduce_tools::cli::Out`).
        Err(e) if ringreduce_tools::cli::is_closed(&e) => 0,
        Err(e) => {
            ringreduce_tools::note!("error: {e}");
            2
        }
    })
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;
    use ringreduce_tools::cli::launch::{NOT_A_RANK, OWN};

    /// `launch -n 2 -- topo` once looked for a program called `topo`:
    /// every command of this binary is either one `launch` runs as a rank
    /// or one it refuses by name.
    #[test]
    fn launch_knows_every_command() {
        for sub in Cli::command().get_subcommands() {
            let name = sub.get_name();
            let own = OWN.contains(&name);
            let not = NOT_A_RANK.iter().any(|(n, _)| *n == name);
            assert!(
                own ^ not,
                "{name}: list it in exactly one of launch::OWN and launch::NOT_A_RANK"
            );
        }
        for name in OWN.iter().chain(NOT_A_RANK.iter().map(|(n, _)| n)) {
            assert!(
                Cli::command().find_subcommand(name).is_some(),
                "launch names {name}, which is no command"
            );
        }
    }
}
