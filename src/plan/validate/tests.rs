use super::*;
use crate::plan::builder::{local_only, PlanBuilder};
use crate::plan::Shape;

/// Regression (issue 26): an op that is not (yet) in the order has no
/// node id, instead of a sentinel that `id` added to.
#[test]
fn an_op_outside_the_order_has_no_node() {
    let shape = Shape::all_reduce(1, 8, 4, false);
    let mut b = PlanBuilder::new("t", shape);
    let begin = b.begin_all();
    let plan = local_only(b, &begin);
    let order = plan.issue_order().unwrap();
    let hb = HappensBefore::new(&plan, &order);
    for (i, _) in plan.ops[0].iter().enumerate() {
        assert!(hb.id((0, i, 0)).is_some());
    }
    let none = HappensBefore::new(&plan, &[]);
    assert_eq!(none.id((0, 0, 0)), None);
    assert!(plan.validate().is_ok());
}
