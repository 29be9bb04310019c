//! A vector of `Copy` items that keeps up to `N` of them inline.
//!
//! A small descriptor (a dense tensor of rank ≤ 4 with one to three buffers) then decodes
//! into one allocation instead of three: its shape and buffer table live inside the
//! `Descriptor`. Decoding, cloning and dropping such descriptors skips the allocator, and
//! a file of many distinct small tensors keeps each one's parts together in memory.

use std::fmt;
use std::ops::{Deref, DerefMut};

/// Up to `N` items inline, more on the heap. Behaves as a slice (`Deref`); grows by
/// [`push`](Self::push) and [`reserve`](Self::reserve). An empty one allocates nothing.
#[derive(Clone)]
pub(crate) enum SmallVec<T: Copy, const N: usize> {
    /// `len` (1 ..= N) items at the front of the array; the rest are copies of the first.
    Inline(u8, [T; N]),
    /// Empty (no allocation), or spilled past `N` items.
    Heap(Vec<T>),
}

impl<T: Copy, const N: usize> SmallVec<T, N> {
    const FITS: () = assert!(N > 0 && N <= u8::MAX as usize);

    /// An empty vector (no allocation).
    pub(crate) const fn new() -> Self {
        SmallVec::Heap(Vec::new())
    }

    /// A vector holding a copy of `items`.
    pub(crate) fn from_slice(items: &[T]) -> Self {
        let () = Self::FITS;
        match items.first() {
            Some(&first) if items.len() <= N => {
                let mut a = [first; N];
                a[..items.len()].copy_from_slice(items);
                SmallVec::Inline(items.len() as u8, a)
            }
            _ => SmallVec::Heap(items.to_vec()),
        }
    }

    /// Append `x`, moving everything to the heap when the inline array is full.
    #[inline]
    pub(crate) fn push(&mut self, x: T) {
        let () = Self::FITS;
        // The decoder's case (a heap array reserved for the whole level) inline.
        if let SmallVec::Heap(v) = self {
            if v.len() < v.capacity() {
                v.push(x);
                return;
            }
        }
        self.push_other(x);
    }

    /// [`push`](Self::push) into an inline array or a full heap one.
    #[inline(never)]
    fn push_other(&mut self, x: T) {
        match self {
            SmallVec::Inline(len, a) if (*len as usize) < N => {
                a[*len as usize] = x;
                *len += 1;
            }
            SmallVec::Inline(_, a) => {
                let mut v = Vec::with_capacity(2 * N);
                v.extend_from_slice(a);
                v.push(x);
                *self = SmallVec::Heap(v);
            }
            SmallVec::Heap(v) if v.capacity() == 0 => *self = SmallVec::from_slice(&[x]),
            SmallVec::Heap(v) => v.push(x),
        }
    }

    /// Make room for `additional` more items: on the heap (exactly) once they would not
    /// fit inline.
    pub(crate) fn reserve(&mut self, additional: usize) {
        let len = self.len();
        if len.saturating_add(additional) <= N {
            return;
        }
        match self {
            SmallVec::Heap(v) => {
                crate::mem::reserve_exact_populated(v, additional);
            }
            SmallVec::Inline(..) => {
                let mut v = Vec::with_capacity(len.saturating_add(additional));
                crate::mem::populate(&v);
                v.extend_from_slice(self);
                *self = SmallVec::Heap(v);
            }
        }
    }

    /// Keep the first `len` items (no effect when there are fewer).
    pub(crate) fn truncate(&mut self, len: usize) {
        match self {
            SmallVec::Inline(n, _) if len == 0 && *n > 0 => *self = SmallVec::new(),
            SmallVec::Inline(n, _) => {
                if len < *n as usize {
                    *n = len as u8;
                }
            }
            SmallVec::Heap(v) => v.truncate(len),
        }
    }

    /// Release unused heap capacity (back inline when the items fit).
    pub(crate) fn shrink_to_fit(&mut self) {
        if let SmallVec::Heap(v) = self {
            if !v.is_empty() && v.len() <= N {
                *self = SmallVec::from_slice(v);
            } else {
                v.shrink_to_fit();
            }
        }
    }

    /// Heap bytes held (0 while inline).
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            SmallVec::Inline(..) => 0,
            SmallVec::Heap(v) => v.capacity() * std::mem::size_of::<T>(),
        }
    }
}

impl<T: Copy, const N: usize> Default for SmallVec<T, N> {
    fn default() -> Self {
        SmallVec::new()
    }
}

impl<T: Copy, const N: usize> Deref for SmallVec<T, N> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        match self {
            SmallVec::Inline(len, a) => &a[..*len as usize],
            SmallVec::Heap(v) => v,
        }
    }
}

impl<T: Copy, const N: usize> DerefMut for SmallVec<T, N> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            SmallVec::Inline(len, a) => &mut a[..*len as usize],
            SmallVec::Heap(v) => v,
        }
    }
}

impl<'a, T: Copy, const N: usize> IntoIterator for &'a SmallVec<T, N> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<T: Copy + PartialEq, const N: usize> PartialEq for SmallVec<T, N> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Copy + Eq, const N: usize> Eq for SmallVec<T, N> {}

impl<T: Copy + fmt::Debug, const N: usize> fmt::Debug for SmallVec<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::SmallVec;

    #[test]
    fn truncate_keeps_a_prefix_inline_or_on_the_heap() {
        let mut v: SmallVec<u32, 3> = SmallVec::from_slice(&[1, 2, 3]);
        v.truncate(300);
        assert_eq!(&*v, &[1, 2, 3]);
        v.truncate(1);
        assert_eq!(&*v, &[1]);
        v.truncate(0);
        assert!(v.is_empty());
        assert_eq!(v.heap_bytes(), 0);
        let mut h: SmallVec<u32, 3> = SmallVec::from_slice(&[1, 2, 3, 4, 5]);
        h.truncate(2);
        assert_eq!(&*h, &[1, 2]);
        h.push(9);
        assert_eq!(&*h, &[1, 2, 9]);
    }

    #[test]
    fn grows_from_empty_through_inline_to_heap_and_back() {
        let mut v: SmallVec<u64, 3> = SmallVec::new();
        assert!(v.is_empty());
        assert_eq!(v.heap_bytes(), 0);
        for i in 0..3 {
            v.push(i * 10);
            assert!(matches!(v, SmallVec::Inline(..)));
            assert_eq!(v.heap_bytes(), 0);
        }
        assert_eq!(&v[..], &[0, 10, 20]);
        v.push(30);
        assert!(matches!(v, SmallVec::Heap(_)));
        assert_eq!(&v[..], &[0, 10, 20, 30]);
        for i in 4..100 {
            v.push(i * 10);
        }
        assert_eq!(v.len(), 100);
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64 * 10));
        v[5] = 7;
        assert_eq!(v[5], 7);
        let mut small: SmallVec<u64, 3> = SmallVec::new();
        small.reserve(10);
        small.push(1);
        small.push(2);
        assert!(matches!(small, SmallVec::Heap(_)));
        small.shrink_to_fit();
        assert!(matches!(small, SmallVec::Inline(2, _)));
        assert_eq!(&small[..], &[1, 2]);
    }

    #[test]
    fn reserve_keeps_items_and_equality_is_by_items() {
        let a: SmallVec<u16, 2> = SmallVec::from_slice(&[1, 2]);
        let mut b: SmallVec<u16, 2> = SmallVec::from_slice(&[1]);
        b.reserve(1);
        assert!(matches!(b, SmallVec::Inline(1, _)));
        b.push(2);
        assert_eq!(a, b);
        b.reserve(5);
        assert!(matches!(b, SmallVec::Heap(_)));
        assert_eq!(a, b);
        assert_eq!(format!("{b:?}"), "[1, 2]");
        let big: SmallVec<u16, 2> = SmallVec::from_slice(&[1, 2, 3]);
        assert!(matches!(big, SmallVec::Heap(_)));
        assert_ne!(a, big);
        let empty: SmallVec<u16, 2> = SmallVec::from_slice(&[]);
        assert_eq!(empty, SmallVec::new());
        assert_eq!(empty.heap_bytes(), 0);
    }
}
