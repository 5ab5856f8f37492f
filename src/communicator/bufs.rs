//! The buffers of a call: one per rank the communicator calls for.
//!
//! A handle of one rank (one rank per thread, or per process) takes that
//! rank's buffer: a slice, a `Vec` or an array. A communicator of every
//! rank (all ranks from one caller) takes one buffer per rank: a slice,
//! `Vec` or array of `Vec`s or of slices, in rank order. The element type
//! follows from the buffers (`comm.all_reduce(&send, &mut recv, op)` with
//! `Vec<f32>`s is a call on `f32`).

use crate::element::Element;

/// Input buffers: one per rank the communicator calls for.
pub trait SendBufs<T: Element> {
    /// The buffers, in rank order.
    fn bufs(&self) -> Vec<&[T]>;
}

/// Output (or in-place) buffers: one per rank the communicator calls for.
pub trait RecvBufs<T: Element> {
    /// The buffers, in rank order.
    fn bufs_mut(&mut self) -> Vec<&mut [T]>;
}

// One rank's buffer.

impl<T: Element> SendBufs<T> for [T] {
    fn bufs(&self) -> Vec<&[T]> {
        vec![self]
    }
}

impl<T: Element> SendBufs<T> for Vec<T> {
    fn bufs(&self) -> Vec<&[T]> {
        vec![self.as_slice()]
    }
}

impl<T: Element, const N: usize> SendBufs<T> for [T; N] {
    fn bufs(&self) -> Vec<&[T]> {
        vec![self.as_slice()]
    }
}

impl<T: Element> RecvBufs<T> for [T] {
    fn bufs_mut(&mut self) -> Vec<&mut [T]> {
        vec![self]
    }
}

impl<T: Element> RecvBufs<T> for Vec<T> {
    fn bufs_mut(&mut self) -> Vec<&mut [T]> {
        vec![self.as_mut_slice()]
    }
}

impl<T: Element, const N: usize> RecvBufs<T> for [T; N] {
    fn bufs_mut(&mut self) -> Vec<&mut [T]> {
        vec![self.as_mut_slice()]
    }
}

// One buffer per rank.

impl<T: Element> SendBufs<T> for [Vec<T>] {
    fn bufs(&self) -> Vec<&[T]> {
        self.iter().map(Vec::as_slice).collect()
    }
}

impl<T: Element> SendBufs<T> for Vec<Vec<T>> {
    fn bufs(&self) -> Vec<&[T]> {
        self.iter().map(Vec::as_slice).collect()
    }
}

impl<T: Element, const N: usize> SendBufs<T> for [Vec<T>; N] {
    fn bufs(&self) -> Vec<&[T]> {
        self.iter().map(Vec::as_slice).collect()
    }
}

impl<T: Element> SendBufs<T> for [&[T]] {
    fn bufs(&self) -> Vec<&[T]> {
        self.to_vec()
    }
}

impl<T: Element> SendBufs<T> for Vec<&[T]> {
    fn bufs(&self) -> Vec<&[T]> {
        self.clone()
    }
}

impl<T: Element, const N: usize> SendBufs<T> for [&[T]; N] {
    fn bufs(&self) -> Vec<&[T]> {
        self.to_vec()
    }
}

impl<T: Element> SendBufs<T> for [&mut [T]] {
    fn bufs(&self) -> Vec<&[T]> {
        self.iter().map(|b| &**b).collect()
    }
}

impl<T: Element> SendBufs<T> for Vec<&mut [T]> {
    fn bufs(&self) -> Vec<&[T]> {
        self.iter().map(|b| &**b).collect()
    }
}

impl<T: Element> RecvBufs<T> for [Vec<T>] {
    fn bufs_mut(&mut self) -> Vec<&mut [T]> {
        self.iter_mut().map(Vec::as_mut_slice).collect()
    }
}

impl<T: Element> RecvBufs<T> for Vec<Vec<T>> {
    fn bufs_mut(&mut self) -> Vec<&mut [T]> {
        self.iter_mut().map(Vec::as_mut_slice).collect()
    }
}

impl<T: Element, const N: usize> RecvBufs<T> for [Vec<T>; N] {
    fn bufs_mut(&mut self) -> Vec<&mut [T]> {
        self.iter_mut().map(Vec::as_mut_slice).collect()
    }
}

impl<T: Element> RecvBufs<T> for [&mut [T]] {
    fn bufs_mut(&mut self) -> Vec<&mut [T]> {
        self.iter_mut().map(|b| &mut **b).collect()
    }
}

impl<T: Element> RecvBufs<T> for Vec<&mut [T]> {
    fn bufs_mut(&mut self) -> Vec<&mut [T]> {
        self.iter_mut().map(|b| &mut **b).collect()
    }
}

impl<T: Element, const N: usize> RecvBufs<T> for [&mut [T]; N] {
    fn bufs_mut(&mut self) -> Vec<&mut [T]> {
        self.iter_mut().map(|b| &mut **b).collect()
    }
}
