//! One ownership pattern for every C handle (`tdesc_descriptor`, `tdesc_tensor`,
//! `tdesc_file`, the builders, writers and readers): a handle is a `Box` handed to C on
//! creation ([`give`]), borrowed by reference while C holds it (`status::ref_arg`), and
//! reclaimed once by its `*_free` function ([`free`]) or by a call that consumes it
//! ([`take`]).

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Box `value` as a handle owned by the C caller.
pub(crate) fn into_raw<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// Box `value` and write the pointer to `*out`, handing ownership to the C caller.
///
/// # Safety
/// `out` must be non-null, aligned and writable (callers check it with
/// `status::out_handle` before doing any work).
pub(crate) unsafe fn give<T>(out: *mut *mut T, value: T) {
    // SAFETY: the caller's promise on `out`; the pointer written is a fresh allocation.
    unsafe { out.write(into_raw(value)) }
}

/// Take back ownership of a non-null handle (a call that consumes its argument).
///
/// # Safety
/// `p` must be a pointer [`give`] wrote for this type `T`, not yet freed or taken; the
/// caller must not use it afterwards.
pub(crate) unsafe fn take<T>(p: *mut T) -> Box<T> {
    // SAFETY: the caller's promise: `p` came from Box::into_raw in `give` and is owned.
    unsafe { Box::from_raw(p) }
}

/// Free a handle the C caller gives back: NULL is a no-op; a panic while dropping is
/// contained (a `*_free` function returns nothing to report it through).
///
/// # Safety
/// `p` must be NULL or a pointer [`give`] wrote for this type `T`, not yet freed or taken.
pub(crate) unsafe fn free<T>(p: *mut T) {
    if p.is_null() {
        return;
    }
    // SAFETY: the caller's promise; ownership ends here, once.
    let owned = unsafe { take(p) };
    let _ = catch_unwind(AssertUnwindSafe(move || drop(owned)));
}
