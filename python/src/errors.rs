//! Library errors as Python exceptions: one class per status (`tensordesc.RegionOverlap`,
//! ...), all subclasses of `tensordesc.Error`, defined in `tensordesc/errors.py` and raised
//! here with the status name, the detail and the byte offset.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use tensordesc::{Error, ErrorKind};

/// A library error on its way to Python (`?` in a `PyResult` function converts it).
#[derive(Debug)]
pub struct Fail(pub Error);

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail(e)
    }
}

impl From<Fail> for PyErr {
    fn from(f: Fail) -> PyErr {
        Python::attach(|py| to_py(py, f.0))
    }
}

/// `REGION_OVERLAP` -> `RegionOverlap`: the Python class name of a status.
pub fn class_name(kind: ErrorKind) -> String {
    kind.name()
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + &c.as_str().to_ascii_lowercase(),
                None => String::new(),
            }
        })
        .collect()
}

static ERRORS_MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

fn class_of<'py>(py: Python<'py>, kind: ErrorKind) -> PyResult<Bound<'py, PyType>> {
    let m = ERRORS_MODULE.get_or_try_init(py, || -> PyResult<Py<PyModule>> {
        Ok(py.import("tensordesc.errors")?.unbind())
    })?;
    Ok(m.bind(py)
        .getattr(class_name(kind))?
        .cast_into::<PyType>()?)
}

/// The Python exception for `e`: an instance of the class named after its status, built as
/// `cls(detail, offset)`.
pub fn to_py(py: Python<'_>, e: Error) -> PyErr {
    match class_of(py, e.kind) {
        Ok(cls) => PyErr::from_type(cls, (e.detail, e.offset)),
        // The errors module is part of the package; failing to import it is itself the
        // error worth seeing.
        Err(import_error) => import_error,
    }
}
