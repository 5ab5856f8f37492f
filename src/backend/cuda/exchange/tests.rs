use super::super::rank::activity::TimingSource;
use super::threads::InProcess;
use super::*;
use crate::backend::OpTime;
use crate::error::Error;

fn op(rank: usize, k: usize) -> OpTime {
    OpTime {
        rank,
        op: k,
        part: 0,
        start_ns: k as f64,
        end_ns: k as f64 + 1.0,
    }
}

/// The capability answers need no GPU: in one process everything
/// works; between processes stream-ordered calls and joint graphs are
/// refused with the reason, as the process front end did.
#[test]
fn capability_answers_refuse_with_the_reason_between_processes() {
    assert!(InProcess.ordered().is_ok());
    assert!(InProcess.joint_graphs("ring").is_ok());
    let e = ipc::refuse_ordered();
    assert!(
        matches!(
            e,
            Error::Refused {
                what: "stream-ordered calls",
                backend: "cuda",
                ..
            }
        ),
        "{e:?}"
    );
    let e = ipc::refuse_joint_graphs("ring:pipe2");
    assert!(
        matches!(&e, Error::Unsupported(m, "cuda") if m.contains("ring:pipe2")),
        "{e:?}"
    );
}

#[test]
fn timelines_say_what_the_clocks_are() {
    let calls = || vec![("ring".to_string(), 5.0), ("ring".to_string(), 9.0)];
    let src = TimingSource::Events("off".into());
    let mine = || -> Vec<RankTiming> {
        vec![(
            vec![(vec![op(1, 0)], src.clone()), (vec![op(1, 1)], src.clone())],
            2.0,
        )]
    };
    // Between processes: this process's rank only, its own clock, no
    // skew.
    let v = ipc::own_timelines(calls(), mine(), false);
    assert_eq!(v.len(), 2);
    assert_eq!(v[1].launch_ns, 9.0);
    assert_eq!(v[1].ops, vec![op(1, 1)]);
    assert_eq!(v[0].skew_ns, 0.0);
    assert!(v[0].clock.starts_with(&src.line()), "{}", v[0].clock);
    assert!(v[0].clock.contains("not aligned"), "{}", v[0].clock);
    let n = ipc::own_timelines(calls(), mine(), true);
    assert!(n[0].clock.contains("anchor event"), "{}", n[0].clock);
    // In one process: every rank's ops, skew from the half-widths.
    let mut both = mine();
    both.push((vec![(vec![op(0, 0)], src.clone())], 1.0));
    let t = InProcess.timelines(calls(), both, false);
    assert_eq!(t[0].ops.len(), 2);
    assert_eq!(t[0].skew_ns, 3.0);
    assert_eq!(t[1].ops, vec![op(1, 1)]);
}
