//! The plain host call's fast path: plain numpy arrays read in one step
//! each, through numpy's `__array_struct__` (a capsule holding numpy's
//! `PyArrayInterface`: the address, shape, strides, element kind and size,
//! and flags, with no Python dict built per array).
//!
//! It takes only what the general reader (`_describe` and `Engine._run`
//! in `ringreduce/__init__.py`) accepts, and reads it the same way: an
//! array of exactly `numpy.ndarray` (no subclass), of one of the nine
//! native-byte-order numpy types the engine reduces, C-contiguous by the
//! same rule as `_c_contiguous`, every rank's of the same type and shape,
//! outputs writable. Anything else (another object, a subclass, a
//! bfloat16 or float8 array, a non-contiguous or big-endian one, a
//! read-only output, a wrong count, ...) is not an error here: the caller
//! is told "not mine" (`None`) and reads the arrays the general way, which
//! raises what it always raised, with the same message.

use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyList, PyTuple, PyType};
use ringreduce::foreign::HostSpan;
use std::os::raw::{c_char, c_int, c_void};

/// numpy's `PyArrayInterface` (`numpy/ndarraytypes.h`), the struct an
/// array's `__array_struct__` capsule holds: numpy's stable array-interface
/// ABI (version 2 of the interface, unchanged since numpy 1.0).
#[repr(C)]
struct PyArrayInterface {
    two: c_int,
    nd: c_int,
    typekind: c_char,
    itemsize: c_int,
    flags: c_int,
    shape: *const isize,
    strides: *const isize,
    data: *mut c_void,
    descr: *mut pyo3::ffi::PyObject,
}

/// `NPY_ARRAY_NOTSWAPPED`: the elements are in this machine's byte order.
const NOTSWAPPED: c_int = 0x0200;
/// `NPY_ARRAY_WRITEABLE` (numpy exports a warn-on-write array without it).
const WRITEABLE: c_int = 0x0400;

/// One plain numpy array as a call sees it.
pub struct Array {
    pub span: HostSpan,
    pub dtype: &'static str,
    pub shape: Vec<isize>,
    pub writable: bool,
}

/// The engine's name of a native-byte-order numpy element type, by kind
/// and size: what numpy's `dtype.name` maps to in `_DTYPE_NAMES` for these.
fn dtype_of(kind: u8, size: c_int) -> Option<&'static str> {
    Some(match (kind, size) {
        (b'i', 1) => "int8",
        (b'u', 1) => "uint8",
        (b'i', 4) => "int32",
        (b'u', 4) => "uint32",
        (b'i', 8) => "int64",
        (b'u', 8) => "uint64",
        (b'f', 2) => "half",
        (b'f', 4) => "float",
        (b'f', 8) => "double",
        _ => return None,
    })
}

/// `_c_contiguous` of `ringreduce/__init__.py`: every dimension longer
/// than 1 has the stride of a C-ordered array.
fn c_contiguous(shape: &[isize], strides: &[isize], itemsize: isize) -> bool {
    let mut expected = itemsize;
    for (&dim, &stride) in shape.iter().zip(strides).rev() {
        if dim > 1 && stride != expected {
            return false;
        }
        expected = match expected.checked_mul(dim) {
            Some(e) => e,
            None => return false,
        };
    }
    true
}

/// numpy's description of one array, borrowed from its capsule.
struct Interface<'a> {
    s: &'a PyArrayInterface,
    shape: &'a [isize],
    strides: &'a [isize],
}

/// The `PyArrayInterface` in `capsule`, an `__array_struct__` of exactly a
/// `numpy.ndarray`, borrowed for as long as the capsule is.
fn interface<'a>(capsule: &'a Bound<'_, PyCapsule>) -> Option<Interface<'a>> {
    // numpy's capsule has no name (`PyCapsule_New(inter, NULL, ...)`).
    let ptr = capsule
        .pointer_checked(None)
        .ok()?
        .cast::<PyArrayInterface>();
    // The one `unsafe` of this module: numpy hands the array's description
    // over as a C struct in a capsule, which no safe API reads.
    // SAFETY: the caller took the capsule from exactly a `numpy.ndarray`
    // (`read`), so it is numpy's own `array_struct_get` result: a pointer
    // to a `PyArrayInterface` numpy allocated for this capsule alone, with
    // `shape` and `strides` (when `nd > 0`) pointing at `nd` `npy_intp`
    // (`isize`) each in a block of its own, freed only by the capsule's
    // destructor; the borrows returned live no longer than the borrow of
    // the capsule, which keeps it alive, and its one user (`read`) calls
    // no Python code while it holds them. `data` is only copied, never
    // dereferenced here.
    unsafe {
        let s = ptr.as_ref();
        let nd = usize::try_from(s.nd).ok()?;
        if nd > 0 && (s.shape.is_null() || s.strides.is_null()) {
            return None;
        }
        let dims = |p: *const isize| match nd {
            0 => &[][..],
            _ => std::slice::from_raw_parts(p, nd),
        };
        Some(Interface {
            s,
            shape: dims(s.shape),
            strides: dims(s.strides),
        })
    }
}

/// `x` read as a plain numpy array, or `None` (not one the fast path
/// takes; see the module's comment). `ndarray` is `numpy.ndarray`.
fn read(x: &Bound<'_, PyAny>, ndarray: &Bound<'_, PyType>) -> Option<Array> {
    if !x.get_type().is(ndarray) {
        return None;
    }
    let capsule = x.getattr(pyo3::intern!(x.py(), "__array_struct__")).ok()?;
    let capsule = capsule.cast::<PyCapsule>().ok()?;
    let Interface { s, shape, strides } = interface(capsule)?;
    if s.two != 2 || s.flags & NOTSWAPPED == 0 {
        return None;
    }
    let dtype = dtype_of(s.typekind as u8, s.itemsize)?;
    let itemsize = isize::try_from(s.itemsize).ok()?;
    if !c_contiguous(shape, strides, itemsize) {
        return None;
    }
    let mut count: usize = 1;
    for &d in shape {
        count = count.checked_mul(usize::try_from(d).ok()?)?;
    }
    let bytes = count.checked_mul(itemsize as usize)?;
    Some(Array {
        span: HostSpan {
            addr: s.data as usize,
            bytes,
        },
        dtype,
        shape: shape.to_vec(),
        writable: s.flags & WRITEABLE != 0,
    })
}

/// The arrays of one side of a call (inputs or outputs), read.
pub struct Arrays<'py> {
    /// The array objects, held for the call: another thread may drop the
    /// caller's list's references while the call runs without the
    /// interpreter lock.
    pub _held: Vec<Bound<'py, PyAny>>,
    pub arrays: Vec<Array>,
}

impl Arrays<'_> {
    pub fn spans(&self) -> Vec<HostSpan> {
        self.arrays.iter().map(|a| a.span).collect()
    }

    pub fn dtype(&self) -> &'static str {
        self.arrays[0].dtype
    }

    pub fn writable(&self) -> bool {
        self.arrays.iter().all(|a| a.writable)
    }
}

/// Every array of `arrays` (exactly a list or a tuple of `n >= 1`), read,
/// of one element type and shape; `None` if any is not the fast path's.
pub fn read_all<'py>(
    arrays: &Bound<'py, PyAny>,
    n: usize,
    ndarray: &Bound<'py, PyType>,
) -> Option<Arrays<'py>> {
    let held: Vec<Bound<'py, PyAny>> = if let Ok(l) = arrays.cast_exact::<PyList>() {
        l.iter().collect()
    } else if let Ok(t) = arrays.cast_exact::<PyTuple>() {
        t.iter().collect()
    } else {
        return None;
    };
    if n == 0 || held.len() != n {
        return None;
    }
    let arrays = held
        .iter()
        .map(|x| read(x, ndarray))
        .collect::<Option<Vec<Array>>>()?;
    let first = &arrays[0];
    if arrays
        .iter()
        .any(|a| a.dtype != first.dtype || a.shape != first.shape)
    {
        return None;
    }
    Some(Arrays {
        _held: held,
        arrays,
    })
}
