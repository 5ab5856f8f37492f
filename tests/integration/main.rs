//! Integration tests, one module per area, in one binary with a small runner
//! that reports GPU tests as SKIPPED (with the reason) on machines without a
//! CUDA driver or with too few GPUs.

mod harness;
#[macro_use]
mod common;
mod api;
mod backends;
mod cli;
mod graphs;
mod nccl;

fn main() -> std::process::ExitCode {
    let mut h = harness::Harness::new();
    backends::register(&mut h);
    api::register(&mut h);
    cli::register(&mut h);
    graphs::register(&mut h);
    nccl::register(&mut h);
    h.run()
}
