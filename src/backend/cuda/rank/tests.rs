use super::waited_desc;
use crate::plan::{OpKind, Shape};

/// A kernel that gave up is named with the step it waited in (an LL
/// ring) or its op (an exchange), and the rank it waited for.
#[test]
fn a_kernel_that_gave_up_names_its_step_and_the_rank_it_waited_for() {
    let kernel_op = |plan: &crate::plan::Plan, r: usize| {
        plan.ops[r]
            .iter()
            .position(|o| matches!(o.kind, OpKind::Kernel(_)))
            .expect("a kernel op")
    };
    let shape = Shape::all_reduce(3, 1000, 4, false);
    let ll = crate::algo::parse("ring:ll").unwrap();
    let plan = ll.path(&shape).next(false).unwrap();
    let i = kernel_op(&plan, 1);
    let d = waited_desc(&plan, 1, i, 0, Some(1));
    assert!(
        d.starts_with("rank 0's lines for ring:ll reduce-scatter step 1")
            && d.contains("in its ll ring kernel"),
        "{d}"
    );
    let d = waited_desc(&plan, 1, i, 0, Some(3));
    assert!(d.contains("all-gather step 1"), "{d}");
    let d = waited_desc(&plan, 1, i, 0, None);
    assert!(d.starts_with("rank 0's lines in ring:ll"), "{d}");
    let d = waited_desc(&plan, 1, i, 0, Some(3));
    assert!(d.contains("all-gather step 1"), "{d}");
    let shape = Shape::all_reduce(2, 1000, 4, true);
    let flag = crate::algo::parse("oneshot:flag").unwrap();
    let plan = flag.path(&shape).next(false).unwrap();
    let i = kernel_op(&plan, 0);
    let d = waited_desc(&plan, 0, i, 1, None);
    assert!(d.starts_with("rank 1's push in oneshot:flag"), "{d}");
}
