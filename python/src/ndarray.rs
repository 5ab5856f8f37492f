//! The plain host call's fast path: plain numpy arrays read in one step
//! each, from the array object's own fields (numpy's `PyArrayObject`: the
//! address, shape, strides, flags and the element type's number and byte
//! order), with no Python object made per array. (Reading them through
//! `__array_struct__` made a capsule and a struct per array: about 0.6 us
//! each on the GPU machine's host.)
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
use pyo3::types::{PyList, PyTuple, PyType};
use ringreduce::foreign::HostSpan;
use ringreduce::DataType;
use std::os::raw::{c_char, c_int};

/// The head of numpy's array object (`PyArrayObject_fields`,
/// `numpy/ndarraytypes.h`): the fields every numpy since 1.0 has in this
/// order (later ones, not read, follow). numpy's C API reads them at
/// these offsets in every extension built against it, so they are part of
/// numpy's ABI (rust-numpy reads them the same way).
#[repr(C)]
struct ArrayObject {
    ob_base: pyo3::ffi::PyObject,
    data: *mut c_char,
    nd: c_int,
    dimensions: *const isize,
    strides: *const isize,
    base: *mut pyo3::ffi::PyObject,
    descr: *const DescrHead,
    flags: c_int,
}

/// The head of numpy's `PyArray_Descr`: the same in numpy 1 and 2 up to
/// `type_num` (numpy 2 changed what follows: `flags` and `elsize` moved,
/// so the size is taken from the type number, never read).
#[repr(C)]
struct DescrHead {
    ob_base: pyo3::ffi::PyObject,
    typeobj: *mut pyo3::ffi::PyTypeObject,
    kind: c_char,
    type_: c_char,
    byteorder: c_char,
    flags: c_char,
    type_num: c_int,
}

/// `NPY_ARRAY_WRITEABLE` (numpy keeps a warn-on-write array without it in
/// what it exports; here the object's own flag, as `flags.writeable`).
const WRITEABLE: c_int = 0x0400;
/// `NPY_ARRAY_WARN_ON_WRITE` (a view numpy warns about when written):
/// left to the general reader.
const WARN_ON_WRITE: c_int = 1 << 31;

/// One plain numpy array as a call sees it (its shape is compared in
/// place, borrowed from the array: see [`read`]).
struct Array {
    span: HostSpan,
    dtype: DataType,
    writable: bool,
}

/// The engine's element type and its size for a numpy element type, by
/// its type number (`NPY_TYPES`, `numpy/ndarraytypes.h`; the C `int` is 32
/// bits and `long` 64 on the Linux targets the wheel is built for): what
/// numpy's `dtype.name` maps to in `_DTYPE_NAMES` for these.
fn dtype_of(type_num: c_int) -> Option<(DataType, isize)> {
    #[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
    compile_error!("the numpy type numbers below assume LP64 Linux");
    use DataType::*;
    Some(match type_num {
        1 => (Int8, 1),        // NPY_BYTE
        2 => (Uint8, 1),       // NPY_UBYTE
        5 => (Int32, 4),       // NPY_INT
        6 => (Uint32, 4),      // NPY_UINT
        7 | 9 => (Int64, 8),   // NPY_LONG, NPY_LONGLONG
        8 | 10 => (Uint64, 8), // NPY_ULONG, NPY_ULONGLONG
        23 => (Half, 2),       // NPY_HALF
        11 => (Float, 4),      // NPY_FLOAT
        12 => (Double, 8),     // NPY_DOUBLE
        _ => return None,
    })
}

/// Whether numpy's byte-order character says this machine's order: `=`
/// (native), `|` (not applicable), or the explicit one of this target.
fn native(byteorder: u8) -> bool {
    let mine = if cfg!(target_endian = "little") {
        b'<'
    } else {
        b'>'
    };
    byteorder == b'=' || byteorder == b'|' || byteorder == mine
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

/// numpy's description of one array, borrowed from the array object.
struct Fields<'a> {
    data: usize,
    shape: &'a [isize],
    strides: &'a [isize],
    type_num: c_int,
    byteorder: u8,
    flags: c_int,
}

/// The fields of `x`, which is exactly a `numpy.ndarray` (checked by the
/// caller), borrowed for as long as `x` is.
fn fields<'a>(x: &'a Bound<'_, PyAny>) -> Option<Fields<'a>> {
    let p = x.as_ptr().cast::<ArrayObject>();
    // The one `unsafe` of this module: numpy's array object is a C struct
    // no safe API reads.
    // SAFETY: `x` is exactly a `numpy.ndarray` (its type is numpy's own,
    // no subclass), so `p` points at numpy's `PyArrayObject_fields`, whose
    // head is `ArrayObject` (numpy's ABI); `descr` is the array's live
    // `PyArray_Descr`, which the array holds a reference to, and whose head
    // is `DescrHead` in numpy 1 and 2; `dimensions` and `strides` point at
    // `nd` `npy_intp` (`isize`) each when `nd > 0`, owned by the array and
    // changed only by a resize or a reshape in place, Python code this
    // borrow's one user (`read`) does not run while it holds them (the
    // interpreter lock is held and nothing here calls back into Python).
    // `data` is only copied, never dereferenced.
    unsafe {
        let a = &*p;
        let nd = usize::try_from(a.nd).ok()?;
        if a.descr.is_null() || (nd > 0 && (a.dimensions.is_null() || a.strides.is_null())) {
            return None;
        }
        let d = &*a.descr;
        let dims = |q: *const isize| match nd {
            0 => &[][..],
            _ => std::slice::from_raw_parts(q, nd),
        };
        Some(Fields {
            data: a.data as usize,
            shape: dims(a.dimensions),
            strides: dims(a.strides),
            type_num: d.type_num,
            byteorder: d.byteorder as u8,
            flags: a.flags,
        })
    }
}

/// `x` read as a plain numpy array, with its shape (borrowed from `x`),
/// or `None` (not one the fast path takes; see the module's comment).
/// `ndarray` is `numpy.ndarray`.
fn read<'a>(x: &'a Bound<'_, PyAny>, ndarray: &Bound<'_, PyType>) -> Option<(Array, &'a [isize])> {
    if !std::ptr::eq(x.get_type_ptr(), ndarray.as_type_ptr()) {
        return None;
    }
    let f = fields(x)?;
    if !native(f.byteorder) || f.flags & WARN_ON_WRITE != 0 {
        return None;
    }
    let (dtype, itemsize) = dtype_of(f.type_num)?;
    if !c_contiguous(f.shape, f.strides, itemsize) {
        return None;
    }
    let mut count: usize = 1;
    for &d in f.shape {
        count = count.checked_mul(usize::try_from(d).ok()?)?;
    }
    let bytes = count.checked_mul(itemsize as usize)?;
    let a = Array {
        span: HostSpan {
            addr: f.data,
            bytes,
        },
        dtype,
        writable: f.flags & WRITEABLE != 0,
    };
    Some((a, f.shape))
}

/// The arrays of one side of a call (inputs or outputs), read.
pub struct Arrays<'py> {
    /// The array objects, held for the call: another thread may drop the
    /// caller's list's references while the call runs without the
    /// interpreter lock.
    pub _held: Vec<Bound<'py, PyAny>>,
    /// Each array's memory, in rank order.
    pub spans: Vec<HostSpan>,
    /// Their element type (every one's).
    pub dtype: DataType,
    /// Whether every one is writable.
    pub writable: bool,
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
    let mut spans = Vec::with_capacity(n);
    let mut writable = true;
    let mut first: Option<(DataType, &[isize])> = None;
    for x in &held {
        let (a, shape) = read(x, ndarray)?;
        match first {
            None => first = Some((a.dtype, shape)),
            Some((d, s)) if d != a.dtype || s != shape => return None,
            Some(_) => {}
        }
        spans.push(a.span);
        writable &= a.writable;
    }
    let dtype = first?.0;
    Some(Arrays {
        _held: held,
        spans,
        dtype,
        writable,
    })
}
