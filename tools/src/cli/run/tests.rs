use super::*;

/// `run --help` names every registered path the command line's
/// collectives run (issue 26: it listed 7 of 9), and so do the other
/// commands' `--algo` helps.
#[test]
fn help_names_every_path() {
    use clap::Args;
    let names = crate::cli::path_names();
    for name in [
        "ring",
        "ring:naive",
        "ring:pipeK",
        "oneshot",
        "oneshot:fused",
        "oneshot:flag",
        "oneshot:ll",
        "ring:flag",
        "ring:ll",
        "ring:simple",
        "ps",
        "hier:G",
        "hier:G:mpi",
    ] {
        assert!(names.contains(&name), "{name} not in {names:?}");
    }
    assert_eq!(names.len(), 13, "{names:?}");
    let helps = [
        RunArgs::augment_args(clap::Command::new("run")).render_long_help(),
        crate::cli::trace::TraceArgs::augment_args(clap::Command::new("trace")).render_long_help(),
        crate::cli::check::CheckArgs::augment_args(clap::Command::new("check")).render_long_help(),
        crate::cli::bench::BenchArgs::augment_args(clap::Command::new("bench")).render_long_help(),
    ];
    for help in helps {
        let help = help.to_string();
        for name in &names {
            assert!(help.contains(name), "--help lacks {name}: {help}");
        }
    }
}
