//! The C strings of a file's metadata map ([`MetaStrings`]), which the file handle keeps
//! once a metadata call has made them.

use std::collections::HashMap;

use tensordesc::file::MetaValue;

use super::TDESC_METADATA_WHOLE;

/// Every key and string value of a file's metadata, NUL-terminated, made on the first
/// metadata call so that C callers can borrow them until `tdesc_file_free`.
#[derive(Default)]
pub(crate) struct MetaStrings {
    /// Key `i` followed by a NUL byte.
    pub(super) keys: Vec<Box<[u8]>>,
    /// (key index, item or WHOLE) → the string value followed by a NUL byte.
    pub(super) strings: HashMap<(usize, usize), Box<[u8]>>,
}

fn with_nul(s: &str) -> Box<[u8]> {
    let mut v = Vec::with_capacity(s.len() + 1);
    v.extend_from_slice(s.as_bytes());
    v.push(0);
    v.into_boxed_slice()
}

impl MetaStrings {
    pub(crate) fn new(m: &[(String, MetaValue)]) -> MetaStrings {
        let mut out = MetaStrings::default();
        for (i, (k, v)) in m.iter().enumerate() {
            out.keys.push(with_nul(k));
            match v {
                MetaValue::Str(s) => {
                    out.strings.insert((i, TDESC_METADATA_WHOLE), with_nul(s));
                }
                MetaValue::Array(items) => {
                    for (j, it) in items.iter().enumerate() {
                        if let MetaValue::Str(s) = it {
                            out.strings.insert((i, j), with_nul(s));
                        }
                    }
                }
                _ => {}
            }
        }
        out
    }
}
