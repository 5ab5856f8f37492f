use super::*;

#[test]
fn builtin_checks_refuse_ranges_the_kernels_would_overrun() {
    let fma = WorkKernel::builtin(Builtin::GradFma);
    let ok = [
        ArgView::Buf {
            offset: 0,
            bytes: 400,
        },
        ArgView::U64(100),
        ArgView::U32(1),
        ArgView::F32(0.999),
        ArgView::F32(0.001),
        ArgView::U32(0),
        ArgView::U32(0),
        ArgView::U32(0),
    ];
    assert_eq!(fma.check_args(&ok), Ok(()));
    let mut short = ok;
    short[1] = ArgView::U64(101);
    assert!(fma.check_args(&short).is_err());
    let mut kind = ok;
    kind[2] = ArgView::F32(1.0);
    assert!(fma.check_args(&kind).unwrap_err().contains("argument 2"));
    assert!(fma.check_args(&ok[..7]).is_err());
    let mem = WorkKernel::builtin(Builtin::GradMem);
    let b = |offset, bytes| ArgView::Buf { offset, bytes };
    let args = |n: u64, x: ArgView| {
        [
            b(0, 64),
            ArgView::U64(n),
            x,
            b(0, 128),
            ArgView::U32(2),
            ArgView::F32(0.5),
            ArgView::U32(0),
            ArgView::U32(0),
            ArgView::U32(0),
        ]
    };
    assert_eq!(mem.check_args(&args(16, b(0, 128))), Ok(()));
    assert!(mem.check_args(&args(16, b(0, 124))).is_err(), "x too short");
    assert!(
        mem.check_args(&args(16, b(4, 128))).is_err(),
        "x misaligned"
    );
    assert!(
        mem.check_args(&args(14, b(0, 128))).is_err(),
        "n not a multiple of 4"
    );
    let chk = WorkKernel::builtin(Builtin::GradCheck);
    let c = |ctr| {
        [
            b(0, 40),
            ArgView::U64(10),
            ctr,
            ArgView::U32(0),
            ArgView::U32(2),
            ArgView::U32(0),
            ArgView::U32(0),
        ]
    };
    assert_eq!(chk.check_args(&c(b(8, 16))), Ok(()));
    assert!(chk.check_args(&c(b(8, 15))).is_err());
    assert!(chk.check_args(&c(b(4, 16))).is_err());
}
