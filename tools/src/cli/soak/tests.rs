use super::*;
use ringreduce::algo::{self, REGISTRY};

/// `--algo all` is every registered path a collective of the command
/// line runs (issue 26: `ring:flag` was missing from a hand-written list).
#[test]
fn all_is_every_registered_path() {
    let all: Vec<String> = paths_of("all").unwrap().iter().map(|c| c.name()).collect();
    for e in REGISTRY {
        for name in e.names {
            let a = algo::example(name).unwrap_or_else(|| panic!("{name} does not parse"));
            let runs = Collective::ALL.iter().any(|&c| algo::runs(a.as_ref(), c));
            assert_eq!(all.contains(&a.name()), runs, "{name} in {all:?}");
        }
    }
    for name in ["ring", "ring:pipe3", "ring:flag", "oneshot:flag", "ps"] {
        assert!(all.iter().any(|n| n == name), "{name} in {all:?}");
    }
    // Only the broadcast's paths are left out.
    assert_eq!(all.len(), algo::names().count() - 2, "{all:?}");
    assert!(!all.iter().any(|n| n.starts_with("bcast")), "{all:?}");
    let two: Vec<String> = paths_of("ring:flag, ps")
        .unwrap()
        .iter()
        .map(|c| c.name())
        .collect();
    assert_eq!(two, ["ring:flag", "ps"]);
    assert!(paths_of("tree").is_err());
}

#[test]
fn help_names_every_path() {
    use clap::Args;
    let mut cmd = SoakArgs::augment_args(clap::Command::new("soak"));
    let help = cmd.render_long_help().to_string();
    for name in crate::cli::path_names() {
        assert!(help.contains(name), "soak --help lacks {name}: {help}");
    }
}
