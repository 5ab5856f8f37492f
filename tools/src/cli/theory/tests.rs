use super::num;

#[test]
fn numbers_are_brief() {
    assert_eq!(num(0.5), "0.5");
    assert_eq!(num(10.0), "10");
    assert_eq!(num(1e-300), "1e-300");
    assert_eq!(num(1e308), "1e308");
    assert_eq!(num(-2.5e12), "-2.5e12");
    assert_eq!(num(f64::INFINITY), "inf");
}
