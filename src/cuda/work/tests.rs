use super::*;
use crate::work::{compute_module, Builtin};

#[test]
fn a_callers_kernel_is_checked_by_kind_only() {
    const PARAMS: &[Param] = &[Param::Ptr, Param::U32];
    // SAFETY: never launched (no GPU here); the test only checks the
    // argument-kind checks.
    let k = unsafe { WorkKernel::from_ptx(compute_module(), "user_entry", PARAMS) };
    assert_eq!(k.builtin_kind(), None);
    assert_eq!(
        k.check_args(&[
            ArgView::Buf {
                offset: 3,
                bytes: 1
            },
            ArgView::U32(7)
        ]),
        Ok(())
    );
    assert!(k.check_args(&[ArgView::U32(7), ArgView::U32(7)]).is_err());
    assert_ne!(k.key(), WorkKernel::builtin(Builtin::GradFma).key());
}
