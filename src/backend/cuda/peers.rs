//! The pure bookkeeping of how a CUDA rank reaches its peers, shared by the
//! backend's two peer exchanges (rank threads of one process,
//! [`super::InProcess`]; one rank per process over CUDA IPC,
//! [`super::Ipc`]) and tested without a GPU: how many events a plan's signals need, which peers' buffers to
//! (re)open after a reserve, and the interprocess event handles' wire form.

use crate::cuda::IpcEventHandle;
use crate::error::{Error, Result};

/// The event count to grow to for a plan of `signals` signals when each
/// rank has `have` (`None`: enough already): a power of two, at least 64,
/// and never more than `cap` (the job's shared board between processes;
/// `None` in one process, whose board grows with the events). A plan with
/// more signals than `cap` is refused, naming its need.
pub(super) fn events_to_grow(
    signals: usize,
    have: usize,
    cap: Option<usize>,
) -> Result<Option<usize>> {
    if signals <= have {
        return Ok(None);
    }
    let want = signals.next_power_of_two().max(64);
    match cap {
        None => Ok(Some(want)),
        Some(c) if signals > c => Err(Error::Plan(format!(
            "a plan with {signals} signals; the job's shared board holds {c}"
        ))),
        Some(c) => Ok(Some(want.min(c))),
    }
}

/// After a reserve's all-gather: the ranks whose buffer this process must
/// (re)open, because its owner replaced it (`replaced[r]`) or this process
/// never opened it (`!known(r)`). A rank missing from `replaced` counts as
/// replaced.
pub(super) fn to_reopen(
    ranks: usize,
    replaced: &[bool],
    known: impl Fn(usize) -> bool,
) -> Vec<usize> {
    (0..ranks)
        .filter(|&r| replaced.get(r).copied().unwrap_or(true) || !known(r))
        .collect()
}

/// Interprocess event handles as one all-gather record.
pub(super) fn encode_events(hs: &[IpcEventHandle]) -> Vec<u8> {
    hs.iter().flat_map(|h| h.0).collect()
}

/// The handles of an all-gather record made by [`encode_events`] (a
/// trailing partial handle is dropped).
pub(super) fn decode_events(b: &[u8]) -> Vec<IpcEventHandle> {
    b.chunks_exact(64)
        .map(|c| {
            let mut h = [0u8; 64];
            h.copy_from_slice(c);
            IpcEventHandle(h)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_grow_in_powers_of_two_from_64_within_the_board() {
        assert_eq!(events_to_grow(10, 64, None).unwrap(), None);
        assert_eq!(events_to_grow(10, 0, None).unwrap(), Some(64));
        assert_eq!(events_to_grow(65, 64, None).unwrap(), Some(128));
        assert_eq!(events_to_grow(1000, 128, None).unwrap(), Some(1024));
        // Between processes the job's board bounds it.
        assert_eq!(events_to_grow(90, 0, Some(96)).unwrap(), Some(96));
        assert_eq!(events_to_grow(10, 0, Some(32)).unwrap(), Some(32));
        let e = events_to_grow(200, 0, Some(128)).unwrap_err().to_string();
        assert!(e.contains("200 signals") && e.contains("holds 128"), "{e}");
    }

    #[test]
    fn only_replaced_or_unknown_peer_buffers_are_reopened() {
        let known = |r: usize| r != 2;
        assert_eq!(
            to_reopen(4, &[false, true, false, false], known),
            vec![1, 2]
        );
        assert_eq!(to_reopen(3, &[false; 3], |_| true), Vec::<usize>::new());
        // A release closes every rank's.
        assert_eq!(to_reopen(3, &[true; 3], |_| true), vec![0, 1, 2]);
        // A rank that said nothing counts as replaced.
        assert_eq!(to_reopen(3, &[false], |_| true), vec![1, 2]);
    }

    #[test]
    fn event_handles_round_trip() {
        let hs: Vec<IpcEventHandle> = (0..3u8).map(|i| IpcEventHandle([i; 64])).collect();
        let b = encode_events(&hs);
        assert_eq!(b.len(), 3 * 64);
        let back = decode_events(&b);
        assert_eq!(back.len(), 3);
        assert!(back.iter().zip(&hs).all(|(a, b)| a.0 == b.0));
        assert!(decode_events(&b[..100]).len() == 1);
    }
}
