//! The library's API tests: the specification of `Communicator`, `Engine`
//! and their waits, one module per area, in one binary with a small runner
//! (`tests/support/harness.rs`) that reports GPU tests as SKIPPED (with the
//! reason) on machines without a CUDA driver or with too few GPUs. Each
//! behaviour is one generic body registered per backend (`name[cpu]`,
//! `name[cuda]`, see `common::test_backend!`). `cargo test -p ringreduce`
//! runs them; the command line's tests are the tools' (`tools/tests/`).

// Rank-indexed loops read like the specification (rank r); keep them.
#![allow(clippy::needless_range_loop)]

#[path = "../support/harness.rs"]
mod harness;
#[macro_use]
#[path = "../support/common.rs"]
mod common;
mod api;
mod comm;
mod waits;

fn main() -> std::process::ExitCode {
    harness::hide_injected_panics();
    let mut h = harness::Harness::new();
    api::register(&mut h);
    comm::register(&mut h);
    waits::register(&mut h);
    h.run()
}
