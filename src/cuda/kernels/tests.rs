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

/// The Simple ring kernel cuts a slot into the tiles the host counts
/// (`SIMPLE_TILE` bytes, a multiple of it past `SIMPLE_MAX_TILES` tiles:
/// the generator's constants, read from its f32 kernel's instructions), so
/// its flags fit the `SIMPLE_MAX_TILES` words each rank keeps.
#[test]
fn the_simple_kernel_and_the_host_agree_on_the_tiles() {
    let ptx = include_str!("../../../ptx/reduce_f32.ptx");
    let words = |line: &str| line.split_whitespace().collect::<Vec<_>>().join(" ");
    let text: Vec<String> = ptx.lines().map(words).collect();
    let has = |s: String| text.iter().any(|l| l.starts_with(&s));
    let per = SIMPLE_TILE * SIMPLE_MAX_TILES;
    assert!(has(format!("add.u64 %rd_TE, %rd_SD, {};", per - 1)));
    assert!(has(format!("div.u64 %rd_TE, %rd_TE, {per};")));
    assert!(has(format!(
        "mul.lo.u64 %rd_TE, %rd_TE, {};",
        SIMPLE_TILE / 4
    )));
    for slot in [
        1,
        16,
        SIMPLE_TILE - 1,
        SIMPLE_TILE,
        1 << 20,
        per,
        per + 1,
        1 << 34,
    ] {
        let t = simple_tiles(slot);
        let tile = SIMPLE_TILE * slot.div_ceil(per).max(1);
        assert!((1..=SIMPLE_MAX_TILES).contains(&t), "{slot} B: {t} tiles");
        assert_eq!(t, slot.div_ceil(tile), "{slot} B");
    }
}
