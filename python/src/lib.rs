//! `tensordesc._native`: the Rust half of the `tensordesc` Python package. The public API
//! is assembled in `tensordesc/__init__.py`; see docs/python.md.

mod args;
mod cli;
mod construct;
mod dlpack;
mod errors;
mod index;
mod io;
mod node;
mod read;
mod source;
mod tensor;
mod views;

use pyo3::prelude::*;
use tensordesc::ErrorKind;

/// A tensor over the memory of a DLPack producer (numpy, torch, another tensordesc
/// tensor) or of a DLPack capsule; the producer's deleter runs once, when the last object
/// using the memory is gone.
#[pyfunction]
fn _from_dlpack(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<tensor::Tensor> {
    Ok(tensor::Tensor {
        held: dlpack::import(py, obj)?,
    })
}

/// DLPack exports made by this package and not yet released (for tests).
#[pyfunction]
fn _live_exports() -> isize {
    dlpack::live_exports()
}

/// Every status: (number, NAME, PythonClassName).
#[pyfunction]
fn _status_codes() -> Vec<(u32, &'static str, String)> {
    ErrorKind::ALL
        .iter()
        .map(|&k| (k.code(), k.name(), errors::class_name(k)))
        .collect()
}

/// Every ggml block type GGML_BLOCKS reads: (name, number, values per block, bytes per
/// block), in type-number order.
#[pyfunction]
fn _ggml_types() -> Vec<(&'static str, u32, u32, u32)> {
    tensordesc::layout::ggml::GGML_TYPES
        .iter()
        .map(|t| (t.name, t.number, t.block_elems, t.block_bytes))
        .collect()
}

/// Every element type of the format: (code, name), in code order.
#[pyfunction]
fn _element_types() -> Vec<(u8, &'static str)> {
    tensordesc::ElementType::ALL
        .iter()
        .map(|t| (t.code(), t.name()))
        .collect()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The library's version: the package's `__version__`.
    m.add("__version__", tensordesc::VERSION)?;
    m.add_class::<tensor::Tensor>()?;
    m.add_class::<tensor::Region>()?;
    m.add_class::<tensor::File>()?;
    m.add_class::<views::Memory>()?;
    m.add_function(wrap_pyfunction!(_from_dlpack, m)?)?;
    m.add_function(wrap_pyfunction!(_live_exports, m)?)?;
    m.add_function(wrap_pyfunction!(_status_codes, m)?)?;
    m.add_function(wrap_pyfunction!(_ggml_types, m)?)?;
    m.add_function(wrap_pyfunction!(_element_types, m)?)?;
    m.add_function(wrap_pyfunction!(construct::_from_array, m)?)?;
    m.add_function(wrap_pyfunction!(construct::_leaf, m)?)?;
    m.add_function(wrap_pyfunction!(construct::_subpaving, m)?)?;
    m.add_function(wrap_pyfunction!(io::_open, m)?)?;
    m.add_function(wrap_pyfunction!(io::_decode, m)?)?;
    m.add_function(wrap_pyfunction!(io::_write, m)?)?;
    m.add_function(wrap_pyfunction!(io::_encode_file, m)?)?;
    m.add_function(wrap_pyfunction!(io::_write_stream, m)?)?;
    m.add_function(wrap_pyfunction!(io::_read_stream, m)?)?;
    m.add_function(wrap_pyfunction!(cli::_run_cli, m)?)?;
    m.add_function(wrap_pyfunction!(cli::_report_panics_as_errors, m)?)?;
    m.add_function(wrap_pyfunction!(cli::_convert, m)?)?;
    Ok(())
}
