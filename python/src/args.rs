//! Integer arguments from Python: converted to the format's fixed-width types, with an
//! out-of-range value reported as `tensordesc.InvalidArgument` (a `ValueError`) that names
//! the parameter, its range and the value — not as a bare `OverflowError`.

use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;
use tensordesc::{Error, ErrorKind};

use crate::errors::Fail;

/// A fixed-width integer type an argument converts to, and its range as the messages
/// write it.
pub trait IntArg: TryFrom<i128> + Copy {
    /// The smallest value, as written in messages (`"0"`, `"-2**63"`).
    const LOW: &'static str;
    /// The largest value, as written in messages (`"255"`, `"2**64 - 1"`).
    const HIGH: &'static str;
}

macro_rules! int_arg {
    ($t:ty, $low:expr, $high:expr) => {
        impl IntArg for $t {
            const LOW: &'static str = $low;
            const HIGH: &'static str = $high;
        }
    };
}

int_arg!(u8, "0", "255");
int_arg!(u32, "0", "2**32 - 1");
int_arg!(u64, "0", "2**64 - 1");
int_arg!(i64, "-2**63", "2**63 - 1");

/// The error for `value` outside `T`'s range, for the parameter `name`.
fn out_of_range<T: IntArg>(name: &str, value: &Bound<'_, PyAny>) -> PyErr {
    let shown = value
        .str()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "?".into());
    Fail(Error::new(
        ErrorKind::InvalidArgument,
        format!(
            "{name} must be an integer from {} to {}, not {shown}",
            T::LOW,
            T::HIGH
        ),
    ))
    .into()
}

/// `value` (an int, or anything with `__index__`) as a `T`; out of range:
/// `InvalidArgument` naming `name` and the range; not an integer: Python's `TypeError`.
pub fn int<T: IntArg>(value: &Bound<'_, PyAny>, name: &str) -> PyResult<T> {
    match value.extract::<i128>() {
        Ok(v) => T::try_from(v).map_err(|_| out_of_range::<T>(name, value)),
        Err(e) if e.is_instance_of::<PyOverflowError>(value.py()) => {
            Err(out_of_range::<T>(name, value))
        }
        Err(e) => Err(e),
    }
}

/// A sequence of integers as `T`s; an entry out of range is reported as `name[k]`.
pub fn ints<T: IntArg>(seq: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<T>> {
    seq.try_iter()?
        .enumerate()
        .map(|(k, v)| int(&v?, &format!("{name}[{k}]")))
        .collect()
}
