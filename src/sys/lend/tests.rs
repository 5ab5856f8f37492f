use super::*;

#[test]
fn loans_end_with_the_call_and_respect_read_only() {
    let input = vec![1u8, 2, 3];
    let mut output = vec![0u8; 3];
    let kept = lend(&[&input], &mut [&mut output], |ins, outs| {
        let a = ins[0].lock();
        assert_eq!(a.bytes(), Some(&[1u8, 2, 3][..]));
        drop(a);
        assert!(ins[0].lock().bytes_mut().is_none(), "inputs are read-only");
        let mut g = outs[0].lock();
        g.bytes_mut().unwrap().copy_from_slice(&[7, 8, 9]);
        drop(g);
        // A thread may keep a clone past the call.
        (ins[0].clone(), outs[0].clone())
    });
    assert_eq!(output, [7, 8, 9]);
    assert!(kept.0.lock().bytes().is_none() && kept.1.lock().bytes().is_none());
    assert_eq!(kept.1.len(), 0);
}

#[test]
fn loans_end_when_the_call_unwinds() {
    let mut output = vec![0u8; 4];
    let kept = std::sync::Mutex::new(None);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        lend(&[], &mut [&mut output], |_, outs| {
            *kept.lock().unwrap() = Some(outs[0].clone());
            panic!("injected panic in a lent call");
        })
    }));
    assert!(r.is_err());
    let l = kept.lock().unwrap().take().unwrap();
    assert!(l.lock().bytes().is_none(), "the loan ended on unwinding");
}
