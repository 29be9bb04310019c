//! Indexing tensors and regions (`t[0:128, 64:96]`) and the boxes of `read`, parsed here
//! so that `t[key]` is one call: the key becomes a box, the box is read by one windowed
//! read, and numpy indexes the result where the key asks for more than a box.
//!
//! Basic indexing as numpy has it — integers (negative ones count from the end), slices,
//! `...` and `None` — becomes one windowed read of a box followed, where needed, by numpy
//! indexing of the result: integers drop their axis, `None` adds one, and a slice whose
//! step is not 1 reads the bounding box of the elements it selects and takes every
//! `step`-th of them (a copy of those elements). Integer and boolean arrays (numpy's
//! advanced indexing) are not windows: read the box and index the numpy array.

use pyo3::exceptions::{PyIndexError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PySlice, PyTuple};
use tensordesc::{Error, ErrorKind};

use crate::errors::Fail;

/// What one axis of a key does to the array of its box after the read.
#[derive(Clone, Copy)]
enum Post {
    /// An integer: the axis is dropped (index 0 of a box of extent 1).
    Drop,
    /// The whole axis of the box (`:`).
    Whole,
    /// Every `step`-th element of the box, from its first (or, for a negative step, its
    /// last).
    Step(isize),
    /// `None`: a new axis of extent 1.
    NewAxis,
}

/// A basic index as the box `[lo, hi)` to read and what numpy does to its array after.
pub struct Window {
    pub lo: Vec<u64>,
    pub hi: Vec<u64>,
    /// The numpy index of the box's array, per key entry; None when it is the array itself.
    post: Option<Vec<Post>>,
    /// The key has a `...` (numpy then keeps a rank-0 result an array).
    ellipsis: bool,
}

/// `type(k).__name__`, for messages.
fn type_name(k: &Bound<'_, PyAny>) -> PyResult<String> {
    Ok(k.get_type().name()?.to_string())
}

fn not_an_index(k: &Bound<'_, PyAny>) -> PyResult<PyErr> {
    Ok(PyIndexError::new_err(format!(
        "only integers, slices (`:`), ellipsis (`...`) and None index a tensor, not {}; for \
         integer or boolean array indices read the box (t.read(box)) and index the numpy array",
        type_name(k)?
    )))
}

fn out_of_bounds(i: impl std::fmt::Display, axis: usize, n: u64) -> PyErr {
    Fail(Error::new(
        ErrorKind::IndexOutOfBounds,
        format!("index {i} is out of bounds for axis {axis} with size {n}"),
    ))
    .into()
}

/// An extent as the `isize` that slice arithmetic uses.
fn extent(n: u64) -> PyResult<isize> {
    isize::try_from(n)
        .map_err(|_| Fail(Error::new(ErrorKind::Overflow, "extent exceeds isize")).into())
}

/// Integer key entry `k` (anything with `__index__` but a bool) against extent `n` of
/// `axis`: the coordinate it selects; None when `k` is not an integer.
fn integer(k: &Bound<'_, PyAny>, axis: usize, n: u64) -> PyResult<Option<u64>> {
    if k.is_instance_of::<PyBool>() {
        return Ok(None);
    }
    let i = match k.extract::<i64>() {
        Ok(i) => i,
        Err(e) if e.is_instance_of::<PyTypeError>(k.py()) => return Ok(None),
        // Beyond i64: outside every extent.
        Err(e) if e.is_instance_of::<PyOverflowError>(k.py()) => {
            let i = k.call_method0("__index__")?;
            return Err(out_of_bounds(i, axis, n));
        }
        Err(e) => return Err(e),
    };
    let j = if i < 0 {
        i as i128 + n as i128
    } else {
        i as i128
    };
    if j < 0 || j >= n as i128 {
        return Err(out_of_bounds(i, axis, n));
    }
    Ok(Some(j as u64))
}

impl Window {
    /// Parse `key` against `shape`.
    pub fn of(key: &Bound<'_, PyAny>, shape: &[u64]) -> PyResult<Window> {
        let py = key.py();
        let single;
        let entries = match key.cast::<PyTuple>() {
            Ok(t) => t,
            Err(_) => {
                single = PyTuple::new(py, [key])?;
                &single
            }
        };
        let rank = shape.len();
        let mut ellipsis = None;
        let mut axes = 0;
        for (i, k) in entries.iter().enumerate() {
            if k.is(py.Ellipsis()) {
                if ellipsis.is_some() {
                    return Err(PyIndexError::new_err(
                        "an index can only have a single ellipsis ('...')",
                    ));
                }
                ellipsis = Some(i);
            } else if !k.is_none() {
                axes += 1;
            }
        }
        if axes > rank {
            return Err(PyIndexError::new_err(format!(
                "too many indices: the tensor has rank {rank}, {axes} were indexed"
            )));
        }
        let fill = rank - axes;
        let mut w = Window {
            lo: Vec::with_capacity(rank),
            hi: Vec::with_capacity(rank),
            post: None,
            ellipsis: ellipsis.is_some(),
        };
        let mut post = Vec::with_capacity(entries.len() + fill);
        let mut trivial = true;
        let whole = |w: &mut Window, post: &mut Vec<Post>, count: usize| {
            for _ in 0..count {
                let a = w.lo.len();
                w.lo.push(0);
                w.hi.push(shape[a]);
                post.push(Post::Whole);
            }
        };
        for (i, k) in entries.iter().enumerate() {
            if Some(i) == ellipsis {
                whole(&mut w, &mut post, fill);
                continue;
            }
            if k.is_none() {
                post.push(Post::NewAxis);
                trivial = false;
                continue;
            }
            let axis = w.lo.len();
            let n = shape[axis];
            if let Ok(s) = k.cast::<PySlice>() {
                let ix = s.indices(extent(n)?)?;
                let (start, step, count) = (ix.start as i64, ix.step as i64, ix.slicelength);
                let last = start + (count as i64 - 1) * step;
                let (lo, hi, p) = if count == 0 {
                    // Clipped to the extent, so start is a valid (empty) corner.
                    let b = start.clamp(0, n as i64);
                    (b, b, Post::Whole)
                } else if step == 1 {
                    (start, last + 1, Post::Whole)
                } else if step > 0 {
                    (start, last + 1, Post::Step(ix.step))
                } else {
                    (last, start + 1, Post::Step(ix.step))
                };
                w.lo.push(lo as u64);
                w.hi.push(hi as u64);
                post.push(p);
                trivial &= step == 1;
            } else {
                let Some(j) = integer(&k, axis, n)? else {
                    return Err(not_an_index(&k)?);
                };
                w.lo.push(j);
                w.hi.push(j + 1);
                post.push(Post::Drop);
                trivial = false;
            }
        }
        if ellipsis.is_none() {
            whole(&mut w, &mut post, fill);
        }
        if !trivial {
            w.post = Some(post);
        }
        Ok(w)
    }

    /// The result of the key from `a`, the array read for its box: `a` itself, its scalar
    /// (a rank-0 result without `...`, as numpy gives it), or `a` indexed by numpy — and
    /// copied when a step other than ±1 would keep the whole box alive under a view.
    pub fn finish<'py>(&self, a: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = a.py();
        let Some(post) = &self.post else {
            return if !self.lo.is_empty() || self.ellipsis {
                Ok(a)
            } else {
                a.get_item(PyTuple::empty(py))
            };
        };
        let slice = py.get_type::<PySlice>();
        let mut index = Vec::with_capacity(post.len() + 1);
        for p in post {
            index.push(match *p {
                Post::Drop => 0i64.into_pyobject(py)?.into_any(),
                Post::Whole => PySlice::full(py).into_any(),
                Post::Step(s) => slice.call1((py.None(), py.None(), s))?,
                Post::NewAxis => py.None().into_bound(py),
            });
        }
        if self.ellipsis {
            index.push(py.Ellipsis().into_bound(py));
        }
        let r = a.get_item(PyTuple::new(py, index)?)?;
        let sparse_step = post
            .iter()
            .any(|p| matches!(p, Post::Step(s) if *s != 1 && *s != -1));
        if sparse_step && r.is_instance_of::<numpy::PyUntypedArray>() {
            // A strided view would keep the whole bounding box alive: keep only the elements.
            return r.call_method0("copy");
        }
        Ok(r)
    }
}

/// The `box` argument of `read` as `(lo, hi)` against `shape`: None (everything), a slice,
/// or a sequence of slices with step 1, one per axis (fewer: the remaining axes whole), as
/// `numpy.s_[0:128, 64:96]` or `Region.box` give them. Bounds follow numpy's rules:
/// negative ones count from the end, and they clip to the extent.
pub fn box_bounds(b: Option<&Bound<'_, PyAny>>, shape: &[u64]) -> PyResult<(Vec<u64>, Vec<u64>)> {
    let Some(b) = b else {
        return Ok((vec![0; shape.len()], shape.to_vec()));
    };
    let entries: Vec<Bound<'_, PyAny>> = if b.is_instance_of::<PySlice>() {
        vec![b.clone()]
    } else {
        b.try_iter()?.collect::<PyResult<_>>()?
    };
    if entries.len() > shape.len() {
        return Err(PyIndexError::new_err(format!(
            "a box of {} axes for a tensor of rank {}",
            entries.len(),
            shape.len()
        )));
    }
    let mut lo = Vec::with_capacity(shape.len());
    let mut hi = Vec::with_capacity(shape.len());
    for (axis, &n) in shape.iter().enumerate() {
        let (start, stop) = match entries.get(axis) {
            None => (0, n),
            Some(e) => {
                let s = e.cast::<PySlice>().map_err(|_| -> PyErr {
                    match type_name(e) {
                        Ok(t) => PyTypeError::new_err(format!(
                            "axis {axis}: a box is made of slices (numpy.s_[0:128, 64:96]), \
                             not {t}; index the tensor (t[...]) for integers"
                        )),
                        Err(err) => err,
                    }
                })?;
                let ix = s.indices(extent(n)?)?;
                if ix.step != 1 {
                    return Err(PyValueError::new_err(format!(
                        "axis {axis}: a box's slices have step 1 (index the tensor, t[...], \
                         for other steps)"
                    )));
                }
                (ix.start as u64, ix.start.max(ix.stop) as u64)
            }
        };
        lo.push(start);
        hi.push(stop);
    }
    Ok((lo, hi))
}
