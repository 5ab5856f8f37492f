//! The study views: a call's plan as Python objects, its trace as text.

use crate::errors::{guarded, ArgumentError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use ringreduce::plan::{Collective, Shape};
use ringreduce::{AlgoChoice, DataType, ReduceOp};

fn shape(
    collective: &str,
    ranks: usize,
    count: usize,
    dtype: DataType,
    in_place: bool,
) -> PyResult<Shape> {
    let collective = match collective {
        "broadcast" => Collective::Broadcast { root: 0 },
        c => Collective::parse(c).map_err(ArgumentError::new_err)?,
    };
    Ok(Shape {
        collective,
        ranks,
        count,
        elem_size: dtype.size(),
        in_place,
    })
}

fn parse<T: std::str::FromStr<Err = String>>(s: &str) -> PyResult<T> {
    s.parse::<T>().map_err(ArgumentError::new_err)
}

/// The plan the engine runs for a call: `{"name", "ranks", "count",
/// "in_place", "scratch", "lines", "ops"}`, `ops` one dict per op of every rank in
/// issue order (rank, index, lane, kind, detail, waits, signal, phase, step,
/// chunk, slice, note).
#[pyfunction]
#[pyo3(signature = (collective="all_reduce", ranks=4, count=8, dtype="float", in_place=false, algo="ring"))]
fn plan<'py>(
    py: Python<'py>,
    collective: &str,
    ranks: usize,
    count: usize,
    dtype: &str,
    in_place: bool,
    algo: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let dtype = parse::<DataType>(dtype)?;
    let s = shape(collective, ranks, count, dtype, in_place)?;
    let choice = parse::<AlgoChoice>(algo)?;
    let p = guarded(py, move || ringreduce::algo::plan_of(&choice, &s))?;
    plan_dict(py, &p)
}

/// A plan as Python objects (see [`plan`]).
pub fn plan_dict<'py>(py: Python<'py>, p: &ringreduce::plan::Plan) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &p.name)?;
    d.set_item("collective", p.shape.collective.to_string())?;
    d.set_item("ranks", p.shape.ranks)?;
    d.set_item("count", p.shape.count)?;
    d.set_item("in_place", p.shape.in_place)?;
    d.set_item("scratch", p.scratch_len)?;
    d.set_item("lines", p.lines_len)?;
    let ops = PyList::empty(py);
    for (rank, list) in p.ops.iter().enumerate() {
        for (index, op) in list.iter().enumerate() {
            let o = PyDict::new(py);
            o.set_item("rank", rank)?;
            o.set_item("index", index)?;
            o.set_item("lane", op.lane.name())?;
            o.set_item("kind", op.kind.name())?;
            o.set_item("detail", format!("{:?}", op.kind))?;
            o.set_item("waits", op.waits.iter().map(|w| w.0).collect::<Vec<_>>())?;
            o.set_item("signal", op.signal.map(|s| s.0))?;
            o.set_item("phase", op.label.phase.map(|ph| format!("{ph:?}")))?;
            o.set_item("step", op.label.step)?;
            o.set_item("chunk", op.label.chunk)?;
            o.set_item("slice", op.label.slice)?;
            o.set_item("note", op.label.note)?;
            ops.append(o)?;
        }
    }
    d.set_item("ops", ops)?;
    Ok(d)
}

/// `ringreduce trace` as text: the call step by step on symbolic memory,
/// then run on the CPU backend with exact inputs.
#[pyfunction]
#[pyo3(signature = (collective="all_reduce", ranks=4, count=8, dtype="float", op="sum", in_place=false, algo="ring"))]
#[allow(clippy::too_many_arguments)]
fn trace(
    py: Python<'_>,
    collective: &str,
    ranks: usize,
    count: usize,
    dtype: &str,
    op: &str,
    in_place: bool,
    algo: &str,
) -> PyResult<String> {
    let dtype = parse::<DataType>(dtype)?;
    let op = parse::<ReduceOp>(op)?;
    let s = shape(collective, ranks, count, dtype, in_place)?;
    let choice = parse::<AlgoChoice>(algo)?;
    guarded(py, move || {
        ringreduce_tools::trace::render(&choice, &s, dtype, op)
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(trace, m)?)?;
    Ok(())
}
