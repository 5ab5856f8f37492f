//! Integration tests: the specification of the command line and of the
//! library through the tools (the library's own API tests are
//! `tests/api/`), one module per area, in one binary with a small runner that reports GPU tests
//! as SKIPPED (with the reason) on machines without a CUDA driver or with too
//! few GPUs. Each behaviour is one generic body registered per backend
//! (`name[cpu]`, `name[cuda]`, see `common::test_backend!`).
//!
//! Tests that expose a library bug say `LIBRARY BUG` in a comment and in
//! their failure message.

// Rank-indexed loops read like the specification (rank r); keep them.
#![allow(clippy::needless_range_loop)]

#[path = "../../../tests/support/harness.rs"]
mod harness;
#[macro_use]
mod common;
mod backends;
mod cli;
mod cli_edges;
mod cli_env;
mod cli_issue41;
mod cli_outputs;
mod docs;
mod faults;
mod graphs;
mod nccl;
mod property;
mod timeline;

fn main() -> std::process::ExitCode {
    harness::hide_injected_panics();
    let mut h = harness::Harness::new();
    backends::register(&mut h);
    faults::register(&mut h);
    cli::register(&mut h);
    cli_edges::register(&mut h);
    cli_issue41::register(&mut h);
    cli_env::register(&mut h);
    cli_outputs::register(&mut h);
    docs::register(&mut h);
    graphs::register(&mut h);
    nccl::register(&mut h);
    property::register(&mut h);
    timeline::register(&mut h);
    h.run()
}
