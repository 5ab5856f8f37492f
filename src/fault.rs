//! Fault injection, for tests of the error paths (this crate's, and those
//! of programs built on it): a rank thread that panics in the middle of a
//! collective, a rank that never issues a step, a failed driver call on
//! one rank, a failed allocation on one rank. Set them with
//! [`EngineConfig::with_faults`](crate::EngineConfig::with_faults); both
//! backends honour them, through [`FaultPlan::inject`]. A job of one
//! process per rank also reads `RINGREDUCE_FAULT` (kills, failed starts,
//! panics and exits of a rank's process), in every build.
//! Every injected fault must end every rank's call with an error naming the
//! rank and the step, within the engine's timeout: never a hang, a process
//! abort, or a changed send buffer.

/// What goes wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The rank thread panics before issuing the op.
    Panic,
    /// The rank never issues the op: it waits until aborted or timed out.
    Stall,
    /// Issuing the op fails as a driver call would.
    Fail,
    /// The rank's next buffer allocation fails.
    AllocFail,
    /// The rank sleeps this many milliseconds before issuing the op, then
    /// goes on: a call made slow without any fault (put one on every rank
    /// at several ops to make a call outlast the timeout while no single
    /// wait does).
    Delay {
        /// How long, in milliseconds.
        ms: u32,
    },
    /// The rank's process kills itself with `SIGKILL` before issuing the op
    /// (one rank per process only: `RINGREDUCE_FAULT=kill:rank=R:call=C:op=K`
    /// in [`crate::process`]; in one process it would end every rank).
    Kill,
}

/// One injected fault: on `rank`, before its op number `op` (index in the
/// rank's op list), in the engine's call number `call` (1-based; `None`:
/// every call). `op` is ignored for [`Fault::AllocFail`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FaultSpec {
    /// The rank.
    pub rank: usize,
    /// The op's index in the rank's list.
    pub op: usize,
    /// The call (1-based; `None`: every call).
    pub call: Option<u64>,
    /// What happens there.
    pub fault: Fault,
}

/// What a backend must do at an op ([`FaultPlan::inject`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Injected {
    /// Never issue the op: wait, as a rank whose step never comes, until
    /// the call is aborted or times out (the message names the op).
    Stall(String),
    /// Fail the op as its driver call would (the message names the op).
    Fail(String),
    /// Kill this process (a rank per process only).
    Kill,
}

/// The faults of an engine (empty: none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultPlan(pub Vec<FaultSpec>);

impl FaultPlan {
    /// No fault.
    pub fn none() -> FaultPlan {
        FaultPlan(Vec::new())
    }

    /// Whether it has no fault.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The fault to inject before `rank`'s op `op` in call `call`, if any.
    pub fn at(&self, rank: usize, op: usize, call: u64) -> Option<Fault> {
        self.0
            .iter()
            .find(|f| {
                f.rank == rank
                    && f.op == op
                    && f.fault != Fault::AllocFail
                    && f.call.is_none_or(|c| c == call)
            })
            .map(|f| f.fault)
    }

    /// Inject the fault of `rank`'s op `op` in call `call`, if the plan has
    /// one (`at` describes the op). A panic panics and a delay sleeps,
    /// here; the others are the backend's to carry out, in its own terms:
    /// what is returned. Both backends call this before every op.
    pub fn inject(
        &self,
        rank: usize,
        op: usize,
        call: u64,
        at: &dyn Fn() -> String,
    ) -> Option<Injected> {
        match self.at(rank, op, call)? {
            Fault::Panic => panic!("injected panic at {}", at()),
            Fault::Delay { ms } => {
                std::thread::sleep(std::time::Duration::from_millis(u64::from(ms)));
                None
            }
            Fault::Stall => Some(Injected::Stall(format!("injected stall at {}", at()))),
            Fault::Fail => Some(Injected::Fail(format!("{}: injected failure", at()))),
            Fault::Kill => Some(Injected::Kill),
            Fault::AllocFail => None,
        }
    }

    /// Whether `rank`'s allocations fail.
    pub(crate) fn alloc_fails(&self, rank: usize) -> bool {
        self.0
            .iter()
            .any(|f| f.rank == rank && f.fault == Fault::AllocFail)
    }
}

/// What one entry of `RINGREDUCE_FAULT` does (one rank per process only;
/// `ringreduce env` describes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EnvFaultKind {
    /// `kill:rank=R[:call=C|:after_calls=N][:op=K]`: rank R's process
    /// kills itself with `SIGKILL` in its call C (default 1; `after_calls=N`
    /// is call N+1), before its op K (default 1, just after Begin: the
    /// other ranks are inside the call, waiting for it).
    Kill {
        /// The call.
        call: u64,
        /// The op's index in the rank's list (1: just after Begin).
        op: usize,
    },
    /// `nostart:rank=R`: rank R fails before joining the job.
    NoStart,
    /// `panic:rank=R[:call=C]`: rank R's process panics on the caller's
    /// thread as it starts its collective C (default 1): the panic unwinds
    /// through the engine, as a program's own panic would (exit status
    /// 101).
    Panic {
        /// The call.
        call: u64,
    },
    /// `exit:rank=R[:call=C][:code=N]`: rank R's process exits with status
    /// N (default 1) as it starts its collective C (default 1), without
    /// unwinding (`std::process::exit`).
    Exit {
        /// The call.
        call: u64,
        /// The exit status.
        code: i32,
    },
}

/// One entry of `RINGREDUCE_FAULT`: a fault on one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EnvFault {
    /// The rank.
    pub rank: usize,
    /// What it does.
    pub kind: EnvFaultKind,
}

impl std::fmt::Display for EnvFault {
    /// The entry as `RINGREDUCE_FAULT` writes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = self.rank;
        match self.kind {
            EnvFaultKind::Kill { call, op } => write!(f, "kill:rank={r}:call={call}:op={op}"),
            EnvFaultKind::NoStart => write!(f, "nostart:rank={r}"),
            EnvFaultKind::Panic { call } => write!(f, "panic:rank={r}:call={call}"),
            EnvFaultKind::Exit { call, code } => write!(f, "exit:rank={r}:call={call}:code={code}"),
        }
    }
}

/// What `RINGREDUCE_FAULT` accepts (for messages and `ringreduce env`).
pub(crate) const ENV_FAULT_SYNTAX: &str =
    "kill:rank=R[:call=C|:after_calls=N][:op=K], nostart:rank=R, panic:rank=R[:call=C] or exit:rank=R[:call=C][:code=N], several separated by commas";

/// Parse a `RINGREDUCE_FAULT` value strictly: every entry a known fault,
/// every parameter known to it and a whole number, `rank` always given. An
/// error says what is wrong with which entry.
pub(crate) fn parse_env_faults(spec: &str) -> Result<Vec<EnvFault>, String> {
    let mut v = Vec::new();
    for entry in spec.split(',') {
        let entry = entry.trim();
        let mut parts = entry.split(':').map(str::trim);
        let kind = parts.next().unwrap_or_default();
        let allowed: &[&str] = match kind {
            "kill" => &["rank", "call", "after_calls", "op"],
            "nostart" => &["rank"],
            "panic" => &["rank", "call"],
            "exit" => &["rank", "call", "code"],
            "" => return Err("an empty entry".into()),
            other => {
                return Err(format!(
                    "unknown fault {other:?} in {entry:?} (kill, nostart, panic or exit)"
                ))
            }
        };
        let mut params: Vec<(&str, u64)> = Vec::new();
        for p in parts {
            let Some((k, val)) = p.split_once('=') else {
                return Err(format!("{p:?} in {entry:?} is not key=value"));
            };
            let (k, val) = (k.trim(), val.trim());
            if !allowed.contains(&k) {
                return Err(format!(
                    "{kind} takes {} (got {k:?} in {entry:?})",
                    allowed.join(", ")
                ));
            }
            if params.iter().any(|(x, _)| *x == k) {
                return Err(format!("{k} given twice in {entry:?}"));
            }
            let n: u64 = val
                .parse()
                .map_err(|_| format!("{k}={val:?} in {entry:?} is not a whole number"))?;
            params.push((k, n));
        }
        let get = |k: &str| params.iter().find(|(x, _)| *x == k).map(|(_, n)| *n);
        let rank = get("rank").ok_or_else(|| format!("{entry:?} names no rank (rank=R)"))?;
        let rank = usize::try_from(rank).map_err(|_| format!("rank={rank} is too large"))?;
        let kind = match kind {
            "kill" => {
                let call = match (get("call"), get("after_calls")) {
                    (Some(_), Some(_)) => {
                        return Err(format!(
                            "{entry:?}: call and after_calls say the same thing; give one"
                        ))
                    }
                    (Some(0), None) => {
                        return Err(format!("{entry:?}: calls count from 1 (call=0)"))
                    }
                    (Some(c), None) => c,
                    (None, Some(n)) => n
                        .checked_add(1)
                        .ok_or_else(|| format!("after_calls={n} is too large"))?,
                    (None, None) => 1,
                };
                let op = get("op").unwrap_or(1);
                let op = usize::try_from(op).map_err(|_| format!("op={op} is too large"))?;
                EnvFaultKind::Kill { call, op }
            }
            "panic" | "exit" => {
                let call = match get("call") {
                    Some(0) => return Err(format!("{entry:?}: calls count from 1 (call=0)")),
                    Some(c) => c,
                    None => 1,
                };
                if kind == "panic" {
                    EnvFaultKind::Panic { call }
                } else {
                    let code = get("code").unwrap_or(1);
                    let code = i32::try_from(code)
                        .ok()
                        .filter(|c| (1..=255).contains(c))
                        .ok_or_else(|| {
                            format!("{entry:?}: code={code} is not an exit status from 1 to 255")
                        })?;
                    EnvFaultKind::Exit { call, code }
                }
            }
            _ => EnvFaultKind::NoStart,
        };
        v.push(EnvFault { rank, kind });
    }
    Ok(v)
}

/// Inject the faults of `RINGREDUCE_FAULT` that strike rank `rank`'s
/// process as it starts its collective `call` (1-based): a panic on the
/// caller's thread, or an exit.
pub(crate) fn at_caller(faults: &[EnvFault], rank: usize, call: u64) {
    for f in faults.iter().filter(|f| f.rank == rank) {
        match f.kind {
            EnvFaultKind::Panic { call: c } if c == call => {
                panic!("injected panic (RINGREDUCE_FAULT) as rank {rank} starts its call {call}")
            }
            EnvFaultKind::Exit { call: c, code } if c == call => std::process::exit(code),
            _ => {}
        }
    }
}

/// The faults of `RINGREDUCE_FAULT` (parsed by [`parse_env_faults`]) that
/// rank `rank`'s collectives inject.
pub(crate) fn env_fault_plan(faults: &[EnvFault], rank: usize) -> FaultPlan {
    FaultPlan(
        faults
            .iter()
            .filter(|f| f.rank == rank)
            .filter_map(|f| match f.kind {
                EnvFaultKind::Kill { call, op } => Some(FaultSpec {
                    rank,
                    op,
                    call: Some(call),
                    fault: Fault::Kill,
                }),
                EnvFaultKind::NoStart | EnvFaultKind::Panic { .. } | EnvFaultKind::Exit { .. } => {
                    None
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests;
