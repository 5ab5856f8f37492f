//! The integration tests' helpers: the shared ones
//! (`tests/support/common.rs`, also the library's API tests'), and those
//! that check calls through the tools' `bench`.

#[macro_use]
#[path = "../../../tests/support/common.rs"]
mod shared;
pub use shared::*;

use ringreduce::{AlgoChoice, Collective, Element, Engine, ReduceOp};
use ringreduce_tools::bench::{self, Contender, ContenderKind};
use ringreduce_tools::verify::{self, Inputs};

/// The repository's root (the workspace's; this crate is its `tools/`),
/// for the tests that read the sources and docs.
pub fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The engine contender for `choice`.
pub fn contender(choice: &AlgoChoice) -> Contender {
    Contender {
        name: choice.name(),
        kind: ContenderKind::Engine(choice.clone()),
    }
}

/// One checked call through `bench::checked_call`: make `kind` inputs for
/// NCCL's `count` of `collective`, load them, poison the outputs, run
/// `choice`, read every rank's output back and verify it (bitwise for exact
/// inputs, within the order bound otherwise), and count changed send buffers
/// out of place. Errors (the engine's, or a wrong result) name the case.
#[allow(clippy::too_many_arguments)]
pub fn checked<T: Element>(
    e: &mut Engine,
    choice: &AlgoChoice,
    collective: Collective,
    count: usize,
    in_place: bool,
    op: ReduceOp,
    kind: Inputs,
    seed: u64,
) -> Result<(), String> {
    let n = e.ranks();
    let what = format!(
        "{} {collective} {} {} count={count} ranks={n} {} {kind} inputs seed={seed}",
        choice.name(),
        T::DTYPE.name(),
        op.name(),
        if in_place { "in place" } else { "out of place" },
    );
    let per_rank = e.shape::<T>(collective, count, in_place).input(0).len();
    let inputs = verify::make_inputs::<T>(kind, op, n, per_rank, seed).expect("inputs");
    let expect = bench::expected(collective, &inputs, op, kind);
    let (wrong, v, _) = bench::checked_call(
        e,
        &contender(choice),
        collective,
        in_place,
        op,
        &inputs,
        &expect,
    )
    .ctx(&what)?;
    if wrong != 0 {
        return Err(format!(
            "{what}: {wrong} wrong (per rank {:?}, changed inputs included), first (rank, index, got, expected) {:?}, max abs err {:e}",
            v.wrong, v.first_wrong, v.max_abs_err
        ));
    }
    Ok(())
}

/// Check `outputs` against the expected result of `collective` on `inputs`.
pub fn verify_outputs<T: Element>(
    what: &str,
    collective: Collective,
    inputs: &[Vec<T>],
    outputs: &[Vec<T>],
    op: ReduceOp,
    kind: Inputs,
) -> Result<(), String> {
    let expect = bench::expected(collective, inputs, op, kind);
    let v = bench::check_outputs(outputs, &expect);
    if !v.passed() {
        return Err(format!(
            "{what}: {} wrong (per rank {:?}), first (rank, index, got, expected) {:?}",
            v.total_wrong(),
            v.wrong,
            v.first_wrong
        ));
    }
    Ok(())
}
