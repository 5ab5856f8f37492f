//! A tiny test runner (the binary has `harness = false`) so that GPU tests can
//! report SKIPPED with a reason instead of passing silently.
//!
//! Usage: `integration [FILTER...] [--list]`; a test runs when its name
//! contains any FILTER (or there is none). Ends with the line
//! `N passed, N failed, N skipped` and a non-zero exit on any failure.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

pub enum Outcome {
    Pass,
    Skip(String),
}

pub type TestResult = Result<Outcome, String>;

/// Keep the panics the fault tests inject on purpose (and their
/// backtraces) out of the output; every other panic prints as before.
pub fn hide_injected_panics() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if !msg.starts_with("injected panic") {
            default_hook(info);
        }
    }));
}

pub struct Harness {
    tests: Vec<(String, Box<dyn Fn() -> TestResult>)>,
}

impl Harness {
    pub fn new() -> Self {
        Harness { tests: Vec::new() }
    }

    pub fn add(&mut self, name: impl Into<String>, f: impl Fn() -> TestResult + 'static) {
        self.tests.push((name.into(), Box::new(f)));
    }

    pub fn run(self) -> std::process::ExitCode {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let list = args.iter().any(|a| a == "--list");
        // libtest flags cargo may pass are ignored.
        let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
        let selected: Vec<_> = self
            .tests
            .iter()
            .filter(|(n, _)| filters.is_empty() || filters.iter().any(|f| n.contains(f.as_str())))
            .collect();
        if list {
            for (n, _) in &selected {
                println!("{n}: test");
            }
            return std::process::ExitCode::SUCCESS;
        }
        println!("\nrunning {} tests", selected.len());
        let (mut pass, mut fail, mut skip) = (0, 0, 0);
        let mut failures = Vec::new();
        for (name, f) in selected {
            let t0 = Instant::now();
            let r = catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
                Err(p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panic".into()))
            });
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            match r {
                Ok(Outcome::Pass) => {
                    pass += 1;
                    println!("test {name} ... ok ({ms:.0} ms)");
                }
                Ok(Outcome::Skip(why)) => {
                    skip += 1;
                    println!("test {name} ... SKIPPED: {why}");
                }
                Err(e) => {
                    fail += 1;
                    println!("test {name} ... FAILED ({ms:.0} ms)");
                    failures.push((name.clone(), e));
                }
            }
        }
        for (n, e) in &failures {
            println!("\n---- {n} ----\n{e}");
        }
        println!();
        println!("{pass} passed, {fail} failed, {skip} skipped");
        if fail > 0 {
            std::process::ExitCode::FAILURE
        } else {
            std::process::ExitCode::SUCCESS
        }
    }
}

/// `ensure!(cond, "fmt", args)`: fail the test with a message.
#[macro_export]
macro_rules! ensure {
    ($c:expr, $($t:tt)*) => {
        if !$c {
            return Err(format!($($t)*));
        }
    };
}
