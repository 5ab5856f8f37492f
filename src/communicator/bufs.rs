//! The buffers of a call, of the shape the communicator's type says.
//!
//! A handle of one rank (`Communicator`, [`OneRank`]) takes that rank's
//! buffer: a slice, a `Vec` or an array. A communicator of every rank
//! (`Communicator<EveryRank>`) takes one buffer per rank: a slice, `Vec` or
//! array of `Vec`s or of slices, in rank order, even for one rank. Each
//! shape accepts only its own buffers, so a flat `Vec` given to a
//! communicator of every rank, or a list of buffers given to one rank's
//! handle, does not compile. The element type follows from the buffers
//! (`comm.all_reduce(&send, &mut recv, op)` with `Vec<f32>`s is a call on
//! `f32`).

use super::{CallShape, EveryRank, OneRank};
use crate::element::Element;

/// Input buffers of a call of a communicator of shape `S`.
pub trait SendBufs<S: CallShape, T: Element> {
    /// The buffers, in rank order.
    fn bufs(&self) -> Vec<&[T]>;
}

/// Output (or in-place) buffers of a call of a communicator of shape `S`.
pub trait RecvBufs<S: CallShape, T: Element> {
    /// The buffers, in rank order.
    fn bufs_mut(&mut self) -> Vec<&mut [T]>;
}

// One rank's buffer.

impl<T: Element> SendBufs<OneRank, T> for [T] {
    fn bufs(&self) -> Vec<&[T]> {
        vec![self]
    }
}

impl<T: Element> SendBufs<OneRank, T> for Vec<T> {
    fn bufs(&self) -> Vec<&[T]> {
        vec![self.as_slice()]
    }
}

impl<T: Element, const N: usize> SendBufs<OneRank, T> for [T; N] {
    fn bufs(&self) -> Vec<&[T]> {
        vec![self.as_slice()]
    }
}

impl<T: Element> RecvBufs<OneRank, T> for [T] {
    fn bufs_mut(&mut self) -> Vec<&mut [T]> {
        vec![self]
    }
}

impl<T: Element> RecvBufs<OneRank, T> for Vec<T> {
    fn bufs_mut(&mut self) -> Vec<&mut [T]> {
        vec![self.as_mut_slice()]
    }
}

impl<T: Element, const N: usize> RecvBufs<OneRank, T> for [T; N] {
    fn bufs_mut(&mut self) -> Vec<&mut [T]> {
        vec![self.as_mut_slice()]
    }
}

// One buffer per rank: any list of anything that reads (writes) as a
// slice.

impl<T: Element, B: AsRef<[T]>> SendBufs<EveryRank, T> for [B] {
    fn bufs(&self) -> Vec<&[T]> {
        self.iter().map(AsRef::as_ref).collect()
    }
}

impl<T: Element, B: AsRef<[T]>> SendBufs<EveryRank, T> for Vec<B> {
    fn bufs(&self) -> Vec<&[T]> {
        self.iter().map(AsRef::as_ref).collect()
    }
}

impl<T: Element, B: AsRef<[T]>, const N: usize> SendBufs<EveryRank, T> for [B; N] {
    fn bufs(&self) -> Vec<&[T]> {
        self.iter().map(AsRef::as_ref).collect()
    }
}

impl<T: Element, B: AsMut<[T]>> RecvBufs<EveryRank, T> for [B] {
    fn bufs_mut(&mut self) -> Vec<&mut [T]> {
        self.iter_mut().map(AsMut::as_mut).collect()
    }
}

impl<T: Element, B: AsMut<[T]>> RecvBufs<EveryRank, T> for Vec<B> {
    fn bufs_mut(&mut self) -> Vec<&mut [T]> {
        self.iter_mut().map(AsMut::as_mut).collect()
    }
}

impl<T: Element, B: AsMut<[T]>, const N: usize> RecvBufs<EveryRank, T> for [B; N] {
    fn bufs_mut(&mut self) -> Vec<&mut [T]> {
        self.iter_mut().map(AsMut::as_mut).collect()
    }
}
