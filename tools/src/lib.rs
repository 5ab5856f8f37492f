//! The `ringreduce` command line's own modules, over the `ringreduce`
//! library, the way nccl-tests lives apart from NCCL: the commands
//! ([`cli`]), the checked sweeps and their contenders ([`bench`](mod@bench)), the
//! reports (text, CSV, JSON, SVG plots: [`report`]), the timelines of
//! real calls (recording, Perfetto/Chrome JSON, SVG drawing:
//! [`timeline`]), a plan step by step ([`trace`](mod@trace)), and the
//! inputs, references and checks every checked call uses ([`verify`]). Public for the binary and the test suites; not an API.

#![deny(unsafe_code)]
// Rank-indexed loops read like the algorithm (rank r, step s); keep them.
#![allow(clippy::needless_range_loop)]

pub mod bench;
pub mod cli;
pub mod report;
pub mod theory;
pub mod timeline;
pub mod trace;
pub mod verify;
