//! Host arrays at the boundary, through rust-numpy: every host call takes
//! numpy arrays (the package turns torch CPU tensors, DLPack and
//! `__array_interface__` objects into numpy arrays first, numpy keeping
//! their exporters alive), and borrows each one for the call with
//! rust-numpy's dynamic borrow checking: an input read-only, an output
//! read-write. So an output that is read-only (or made so after a call was
//! prepared), an output that is also an input, an array another call is
//! writing, a non-contiguous or foreign-byte-order array, and every
//! element type the engine does not reduce are refused with the reason,
//! and no address is ever read out of a Python object by hand. The arrays
//! stay borrowed (and referenced) until the call returns.

use numpy::{
    PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyReadwriteArrayDyn,
    PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use ringreduce::{DataType, Element, Error};

use crate::errors::ArgumentError;

/// The engine's element type of a numpy dtype: numpy's own types by
/// name, and ml_dtypes' bfloat16 and float8 (types numpy does not have).
fn engine_dtype(name: &str) -> Option<DataType> {
    use DataType::*;
    Some(match name {
        "int8" => Int8,
        "uint8" => Uint8,
        "int32" => Int32,
        "uint32" => Uint32,
        "int64" => Int64,
        "uint64" => Uint64,
        "float16" => Half,
        "float32" => Float,
        "float64" => Double,
        "bfloat16" => Bfloat16,
        "float8_e4m3fn" => F8e4m3,
        "float8_e5m2" => F8e5m2,
        _ => return None,
    })
}

/// The engine's element type of one of numpy's built-in type numbers
/// (`NPY_TYPES`; C's int and long by their width, which differs between
/// platforms), without asking Python.
fn by_number(num: std::os::raw::c_int, size: usize) -> Option<DataType> {
    use DataType::*;
    Some(match (num, size) {
        (1, 1) => Int8,          // NPY_BYTE
        (2, 1) => Uint8,         // NPY_UBYTE
        (5 | 7 | 9, 4) => Int32, // NPY_INT, NPY_LONG, NPY_LONGLONG
        (5 | 7 | 9, 8) => Int64,
        (6 | 8 | 10, 4) => Uint32, // NPY_UINT, NPY_ULONG, NPY_ULONGLONG
        (6 | 8 | 10, 8) => Uint64,
        (11, 4) => Float,  // NPY_FLOAT
        (12, 8) => Double, // NPY_DOUBLE
        (23, 2) => Half,   // NPY_HALF
        _ => return None,
    })
}

/// One side of a call's arrays (inputs, or outputs), checked: numpy
/// arrays of one element type and shape.
pub struct Side<'py> {
    pub arrays: Vec<Bound<'py, PyUntypedArray>>,
    pub dtype: DataType,
}

/// `arrays` (a list or a tuple) as numpy arrays of one element type
/// (`dtype`: the engine's name for it, when the caller says what arrays of
/// another type of that size hold: a torch bfloat16 tensor seen as
/// uint16) and shape, `n` of them; `what` names them in errors, ranks from
/// `base`.
pub fn side<'py>(
    arrays: &Bound<'py, PyAny>,
    n: usize,
    base: usize,
    what: &str,
    dtype: Option<DataType>,
) -> PyResult<Side<'py>> {
    let items: Vec<Bound<'py, PyAny>> = if let Ok(l) = arrays.cast::<PyList>() {
        l.iter().collect()
    } else if let Ok(t) = arrays.cast::<PyTuple>() {
        t.iter().collect()
    } else {
        return Err(ArgumentError::new_err(format!(
            "the {what}s must be a list of arrays, one per rank (got one {})",
            arrays.get_type().name()?
        )));
    };
    if items.len() != n {
        return Err(ArgumentError::new_err(format!(
            "expected one {what} per rank this engine calls for: {n} ranks but {} {what}s",
            items.len()
        )));
    }
    let mut out: Vec<Bound<'py, PyUntypedArray>> = Vec::with_capacity(n);
    let mut first: Option<(DataType, Vec<usize>)> = None;
    for (i, x) in items.into_iter().enumerate() {
        let r = base + i;
        let a = x.cast_into::<PyUntypedArray>().map_err(|e| {
            ArgumentError::new_err(format!(
                "rank {r}: the {what} is a {}, not a numpy array",
                e.into_inner()
                    .get_type()
                    .name()
                    .map_or("?".into(), |n| n.to_string())
            ))
        })?;
        let descr = a.dtype();
        let t = match dtype {
            // The caller says what the elements are: the array's own type
            // must be as wide (the memory is reinterpreted, not converted).
            Some(t) if descr.itemsize() == t.size() => t,
            Some(t) => {
                return Err(ArgumentError::new_err(format!(
                    "rank {r}: the {what} holds {}-byte elements, not {}'s {}",
                    descr.itemsize(),
                    t.name(),
                    t.size()
                )))
            }
            None => match by_number(descr.num(), descr.itemsize()) {
                Some(t) => t,
                // The rest by name (`dtype.name` is Python code in numpy,
                // ~1 us an array: ml_dtypes' types, and the refusals).
                None => {
                    let name: String = descr.getattr("name")?.extract()?;
                    engine_dtype(&name).ok_or_else(|| {
                        ArgumentError::new_err(format!(
                            "rank {r}: the {what} has element type {name}, which ringreduce does not reduce (int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, float32, float64, float8_e4m3fn, float8_e5m2)"
                        ))
                    })?
                }
            },
        };
        if !descr.is_native_byteorder().unwrap_or(true) {
            return Err(ArgumentError::new_err(format!(
                "rank {r}: the {what} is not in this machine's byte order: pass a native-order copy (a.astype(a.dtype.newbyteorder('=')))"
            )));
        }
        if !a.is_c_contiguous() {
            return Err(ArgumentError::new_err(format!(
                "rank {r}: the {what} is not contiguous (shape {:?}, strides {:?}); pass a C-contiguous copy (numpy.ascontiguousarray)",
                a.shape(),
                a.strides()
            )));
        }
        match &first {
            None => first = Some((t, a.shape().to_vec())),
            Some((t0, _)) if *t0 != t => {
                return Err(ArgumentError::new_err(format!(
                    "rank {r}: the {what} is {} but rank {base}'s is {}: every rank's arrays must have the same element type",
                    t.name(),
                    t0.name()
                )))
            }
            Some((_, s0)) if s0.as_slice() != a.shape() => {
                return Err(ArgumentError::new_err(format!(
                    "rank {r}: the {what} has shape {:?} but rank {base}'s has {s0:?}: every rank's arrays must have the same shape",
                    a.shape()
                )))
            }
            Some(_) => {}
        }
        out.push(a);
    }
    let dtype = first.map_or(DataType::Float, |f| f.0);
    Ok(Side { arrays: out, dtype })
}

/// The numpy type an engine type's memory is borrowed as: its own where
/// numpy has it, else an unsigned integer of its width (bfloat16, float8).
pub trait Storage: Element {
    type As: numpy::Element + bytemuck::Pod;
}

macro_rules! storage {
    ($($t:ty => $s:ty),* $(,)?) => { $(impl Storage for $t { type As = $s; })* };
}

storage!(
    i8 => i8, u8 => u8, i32 => i32, u32 => u32, i64 => i64, u64 => u64,
    ringreduce::f16 => ringreduce::f16, f32 => f32, f64 => f64,
    ringreduce::bf16 => u16,
    ringreduce::element::F8E4M3 => u8, ringreduce::element::F8E5M2 => u8,
);

/// `a` as an array of `S` (a view when its own type is another of the same
/// width: bfloat16 as uint16, or what the caller named).
fn typed<'py, S: numpy::Element>(
    a: &Bound<'py, PyUntypedArray>,
) -> PyResult<Bound<'py, PyArrayDyn<S>>> {
    if let Ok(t) = a.cast::<PyArrayDyn<S>>() {
        return Ok(t.clone());
    }
    let py = a.py();
    let view = a.call_method1("view", (numpy::dtype::<S>(py),))?;
    Ok(view.cast_into::<PyArrayDyn<S>>()?)
}

/// An array that cannot be borrowed as the call needs, said.
fn borrow_error(r: usize, what: &str, e: numpy::BorrowError) -> PyErr {
    let why = match e {
        numpy::BorrowError::NotWriteable => {
            "is read-only (its flags say so: made read-only after the call was prepared, or a view numpy will not let anyone write)".to_string()
        }
        numpy::BorrowError::AlreadyBorrowed => {
            "is in use: it may share memory with another array of this call (an output that is an input: pass outputs=None for an in-place call; two outputs on one buffer), or another call writes it now".to_string()
        }
        other => other.to_string(),
    };
    ArgumentError::new_err(format!("rank {r}: the {what} {why}"))
}

/// Which array of this call the output `a` (of rank `r`) shares memory
/// with, said (`None`: none of them; another call holds it). Asked of
/// numpy (`numpy.shares_memory`) only when a borrow failed.
fn overlap(
    inputs: &[Bound<'_, PyUntypedArray>],
    earlier: &[Bound<'_, PyUntypedArray>],
    a: &Bound<'_, PyUntypedArray>,
    base: usize,
    r: usize,
    what: &str,
) -> Option<PyErr> {
    let np = a.py().import("numpy").ok()?;
    let shares = |b: &Bound<'_, PyUntypedArray>| {
        np.call_method1("shares_memory", (a, b))
            .and_then(|x| x.extract::<bool>())
            .unwrap_or(false)
    };
    if let Some(k) = inputs.iter().position(shares) {
        return Some(ArgumentError::new_err(format!(
            "rank {r}: the {what} overlaps rank {}'s input: an output must not be an input (pass outputs=None for an in-place call)",
            base + k
        )));
    }
    let k = earlier.iter().position(shares)?;
    Some(ArgumentError::new_err(format!(
        "rank {r}: the {what} and rank {}'s {what} share memory: every rank needs its own",
        base + k
    )))
}

/// A call's memory as the engine takes it: the inputs, the outputs.
pub type Slices<'a, E> = (Vec<&'a [E]>, Vec<&'a mut [E]>);

/// The arrays of a call borrowed: inputs read-only, outputs (in place: the
/// buffers) read-write, for as long as this lives.
pub struct Borrowed<'py, S: numpy::Element> {
    ins: Vec<PyReadonlyArrayDyn<'py, S>>,
    outs: Vec<PyReadwriteArrayDyn<'py, S>>,
}

impl<'py, S: numpy::Element + bytemuck::Pod> Borrowed<'py, S> {
    pub fn new(
        inputs: &[Bound<'py, PyUntypedArray>],
        outputs: &[Bound<'py, PyUntypedArray>],
        base: usize,
        out_what: &str,
    ) -> PyResult<Self> {
        let mut ins = Vec::with_capacity(inputs.len());
        for (i, a) in inputs.iter().enumerate() {
            ins.push(
                typed::<S>(a)?
                    .try_readonly()
                    .map_err(|e| borrow_error(base + i, "input", e))?,
            );
        }
        let mut outs = Vec::with_capacity(outputs.len());
        for (i, a) in outputs.iter().enumerate() {
            let w = typed::<S>(a)?.try_readwrite().map_err(|e| {
                if matches!(e, numpy::BorrowError::AlreadyBorrowed) {
                    if let Some(err) = overlap(inputs, &outputs[..i], a, base, base + i, out_what) {
                        return err;
                    }
                }
                borrow_error(base + i, out_what, e)
            })?;
            outs.push(w);
        }
        Ok(Borrowed { ins, outs })
    }

    /// The borrowed memory as the engine's element type `E` (stored as
    /// `S`).
    pub fn slices<E: Storage<As = S>>(&mut self) -> Result<Slices<'_, E>, Error> {
        let not = || Error::internal("a C-contiguous array gave no slice");
        let cast = |e: bytemuck::PodCastError| Error::internal(format!("an array's memory: {e}"));
        let send = self
            .ins
            .iter()
            .map(|a| {
                a.as_slice()
                    .map_err(|_| not())
                    .and_then(|s| bytemuck::try_cast_slice::<S, E>(s).map_err(cast))
            })
            .collect::<Result<_, _>>()?;
        let recv = self
            .outs
            .iter_mut()
            .map(|a| {
                a.as_slice_mut()
                    .map_err(|_| not())
                    .and_then(|s| bytemuck::try_cast_slice_mut::<S, E>(s).map_err(cast))
            })
            .collect::<Result<_, _>>()?;
        Ok((send, recv))
    }
}
