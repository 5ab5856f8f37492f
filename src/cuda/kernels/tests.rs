use super::*;

/// The LL kernels count calls in exactly `LL_MAX_BLOCKS` words (the
/// generator's constant, named in the `calls` parameter's comment of
/// every LL kernel), and the grid never exceeds it.
#[test]
fn the_ll_kernels_and_the_host_agree_on_the_call_counts() {
    let ptx = include_str!("../../../ptx/reduce_f32.ptx");
    let said = format!("LL call counts, LL_MAX_BLOCKS {LL_MAX_BLOCKS}");
    assert!(ptx.contains(&said), "ptx/reduce_f32.ptx must say {said:?}");
    for sms in [1, 16, 114, 132, 1000] {
        for ranks in [2, 3, 4, 8, 64, 200] {
            for slot in [16, 4096, 1 << 20, 1 << 30] {
                let b = ll_blocks(slot, ranks, sms);
                assert!(
                    (1..=LL_MAX_BLOCKS).contains(&b),
                    "{slot} B, {ranks} ranks: {b}"
                );
                // Every rank's grid resident on one GPU.
                assert!(
                    b * ranks <= (LL_BLOCKS_PER_SM * sms).max(ranks),
                    "{slot} B, {ranks} ranks, {sms} SMs: {b}"
                );
            }
        }
    }
}
