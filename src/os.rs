//! Operating-system calls that std does not offer, in checked wrappers,
//! for programs built around the library: a launcher of rank processes
//! (`ringreduce launch` is one: it puts each rank in its own process
//! group, makes it die with the launcher, forwards Ctrl-C and stops the
//! ranks with `SIGTERM`, then `SIGKILL`), and a tool that writes output
//! files or sizes its inputs to the host, and a vector whose memory may
//! not be had (an error, not an abort). The `unsafe` calls behind them
//! live in the crate's private `sys` module.

pub use crate::sys::fs::check_writable;
pub use crate::sys::proc::{
    catch_interrupts, caught, die_with_parent, exit_now, signal_group, signal_name,
    stdout_was_closed, uid, Sig,
};
pub use crate::sys::proc::{host_memory, zeroed};
