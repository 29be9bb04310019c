//! `File`: the tensors of a mapped file, by name.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tensordesc::file::MetaValue;
use tensordesc::{Error, ErrorKind, FileReader};

use super::Tensor;
use crate::errors::Fail;
use crate::source::{Held, Source};

/// The tensors of a `.tdf` file, by name. The file stays mapped (read-only) while this
/// object, any of its tensors, or any array or export viewing them is alive.
#[pyclass(module = "tensordesc", frozen, name = "File")]
pub struct File {
    pub reader: Arc<FileReader<'static>>,
    pub path: String,
    pub tensors: Vec<Arc<Held>>,
}

impl File {
    pub fn new(reader: FileReader<'static>, path: String) -> File {
        let reader = Arc::new(reader);
        let shared_path: Arc<str> = Arc::from(path.as_str());
        let tensors = reader
            .entries()
            .map(|e| {
                Held::new(
                    Source::File {
                        reader: reader.clone(),
                        index: e.index(),
                        path: shared_path.clone(),
                    },
                    Some(e.name().to_string()),
                )
            })
            .collect();
        File {
            reader,
            path,
            tensors,
        }
    }

    fn find(&self, name: &str) -> Option<&Arc<Held>> {
        self.reader.find(name).and_then(|i| self.tensors.get(i))
    }
}

/// A metadata value as a Python object (arrays as lists, element by element).
fn meta_value<'py>(py: Python<'py>, v: &MetaValue) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        MetaValue::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        MetaValue::Int(i) => i.into_pyobject(py)?.into_any(),
        MetaValue::UInt(u) => u.into_pyobject(py)?.into_any(),
        MetaValue::Float(f) => f.into_pyobject(py)?.into_any(),
        MetaValue::Str(s) => s.into_pyobject(py)?.into_any(),
        MetaValue::Array(items) => {
            let l = PyList::empty(py);
            for it in items {
                l.append(meta_value(py, it)?)?;
            }
            l.into_any()
        }
    })
}

#[pymethods]
impl File {
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    /// The file's data_buffer_alignment (a foreign file: the largest alignment one of its
    /// buffers has).
    #[getter]
    fn alignment(&self) -> u32 {
        self.reader.data_buffer_alignment()
    }

    /// What kind of file it is: "tdf", "safetensors", "sharded-safetensors" or "gguf".
    #[getter]
    fn container(&self) -> &'static str {
        self.reader.container().name()
    }

    /// Why pieces of quantized weights that look like a convention were left ungrouped.
    #[getter]
    fn grouping_notes(&self) -> Vec<String> {
        self.reader.grouping_notes().to_vec()
    }

    /// The file's metadata map as a dict (a new dict each time; values typed: str, int,
    /// float, bool, list).
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.reader.metadata() {
            d.set_item(k, meta_value(py, v)?)?;
        }
        Ok(d)
    }

    fn __len__(&self) -> usize {
        self.tensors.len()
    }

    fn __contains__(&self, name: &str) -> bool {
        self.reader.find(name).is_some()
    }

    fn __getitem__(&self, name: &str) -> PyResult<Tensor> {
        match self.find(name) {
            Some(h) => Ok(Tensor { held: h.clone() }),
            None => Err(Fail(Error::new(
                ErrorKind::NotFound,
                format!("no tensor named {name:?} in {}", self.path),
            ))
            .into()),
        }
    }

    /// The tensor named `name`, or `default`.
    #[pyo3(signature = (name, default=None))]
    fn get(&self, py: Python<'_>, name: &str, default: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        match self.find(name) {
            Some(h) => Ok(Py::new(py, Tensor { held: h.clone() })?.into_any()),
            None => Ok(default.unwrap_or_else(|| py.None())),
        }
    }

    /// Tensor names in file order.
    fn keys(&self) -> Vec<String> {
        self.tensors.iter().filter_map(|h| h.name.clone()).collect()
    }

    fn values(&self) -> Vec<Tensor> {
        self.tensors
            .iter()
            .map(|h| Tensor { held: h.clone() })
            .collect()
    }

    fn items(&self) -> Vec<(String, Tensor)> {
        self.tensors
            .iter()
            .map(|h| {
                (
                    h.name.clone().unwrap_or_default(),
                    Tensor { held: h.clone() },
                )
            })
            .collect()
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyList::new(py, self.keys())?.try_iter()?.into_any())
    }

    /// Validate every tensor's contents.
    fn validate(&self, py: Python<'_>) -> PyResult<()> {
        let all = self.tensors.clone();
        py.detach(move || all.iter().try_for_each(|h| h.validate()))
            .map_err(Fail)?;
        Ok(())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Leaving a `with` block releases nothing by itself: the mapping lives as long as any
    /// object using it.
    fn __exit__(
        &self,
        _t: Option<&Bound<'_, PyAny>>,
        _v: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        false
    }

    fn __repr__(&self) -> String {
        let kind = match self.reader.container().name() {
            "tdf" => String::new(),
            other => format!(" ({other})"),
        };
        format!(
            "<tensordesc.File {:?}{kind}: {} tensors>",
            self.path,
            self.tensors.len()
        )
    }
}
