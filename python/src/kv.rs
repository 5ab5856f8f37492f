//! A Python object as the job's key-value store ([`KeyValue`]): what
//! `ringreduce.torch` hands over for torch.distributed's `Store`. Only the
//! join calls it (rank 0 sets one key, the others get it), each time taking
//! the interpreter lock for the call.

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use ringreduce::{Error, KeyValue};
use std::time::Duration;

/// An object with `set(key: str, value: bytes)` and `get(key: str,
/// timeout: float) -> bytes | None` (None: not set in time).
pub struct PyKeyValue {
    obj: Py<PyAny>,
    what: String,
}

impl PyKeyValue {
    pub fn new(obj: &Bound<'_, PyAny>) -> PyResult<PyKeyValue> {
        for m in ["set", "get"] {
            if !obj.hasattr(m)? {
                return Err(crate::errors::ArgumentError::new_err(format!(
                    "store must be a directory path or an object with set(key, value) and get(key, timeout); {} has no {m}",
                    obj.get_type().name()?
                )));
            }
        }
        Ok(PyKeyValue {
            what: format!("the key-value store {}", obj.repr()?),
            obj: obj.clone().unbind(),
        })
    }
}

fn failed(what: &str, call: &str, e: PyErr) -> Error {
    Error::BadArgument(format!("{what}: {call} raised {e}"))
}

impl KeyValue for PyKeyValue {
    fn set(&self, key: &str, value: &[u8]) -> ringreduce::Result<()> {
        Python::attach(|py| {
            self.obj
                .call_method1(py, "set", (key, PyBytes::new(py, value)))
                .map(|_| ())
                .map_err(|e| failed(&self.what, "set", e))
        })
    }

    fn get(&self, key: &str, timeout: Duration) -> ringreduce::Result<Option<Vec<u8>>> {
        Python::attach(|py| {
            let v = self
                .obj
                .call_method1(py, "get", (key, timeout.as_secs_f64()))
                .map_err(|e| failed(&self.what, "get", e))?;
            if v.is_none(py) {
                return Ok(None);
            }
            v.extract::<Vec<u8>>(py).map(Some).map_err(|_| {
                Error::BadArgument(format!(
                    "{}: get({key:?}) returned neither bytes nor None",
                    self.what
                ))
            })
        })
    }

    fn describe(&self) -> String {
        self.what.clone()
    }
}
