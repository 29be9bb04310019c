//! Sharded safetensors checkpoints: a `*.safetensors.index.json` naming, for every tensor,
//! the shard file that holds it (`weight_map`), and the shards beside it.
//!
//! ```json
//! {"metadata": {"total_size": 123},
//!  "weight_map": {"a.weight": "model-00001-of-00002.safetensors", ...}}
//! ```
//!
//! The index is untrusted like a header: at most [`MAX_INDEX`] bytes, JSON read by the
//! bounded reader (nesting at most 64 deep, a key twice is `DUPLICATE_NAME`), `weight_map` an
//! object of strings, each a plain file name in the index's directory (no path separator,
//! not `.` or `..`: a name that would reach outside is `CONTENT_INVALID`). The shards are
//! the distinct names, in the order they first appear.

use std::path::{Path, PathBuf};

use super::json::{parse_value, Json, Number, Value};
use super::MetaValue;
use crate::error::{Error, ErrorKind, Result};

/// The largest index file read (100 MB, as a safetensors header).
pub const MAX_INDEX: u64 = 100_000_000;

/// The name every index file ends with.
pub const INDEX_SUFFIX: &str = ".safetensors.index.json";

/// A parsed index.
#[derive(Debug)]
pub(crate) struct Index {
    /// Shard file names, in order of first appearance in `weight_map`.
    pub(crate) shards: Vec<String>,
    /// Every tensor name with the index of its shard in `shards`, in the index's order.
    pub(crate) weight_map: Vec<(String, u32)>,
    /// The index's `metadata` object (nested objects as their JSON text).
    pub(crate) metadata: Vec<(String, MetaValue)>,
}

/// The index file `path` names, when it names a sharded checkpoint: a directory holding
/// exactly one `*.safetensors.index.json` (none: `IO`; several: `INVALID_ARGUMENT` naming
/// them), or a file whose name ends with `.index.json`. `None` for anything else.
pub(crate) fn index_path(path: &Path) -> Result<Option<PathBuf>> {
    let is_index = |p: &Path| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(".index.json"))
    };
    if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
        let rd = std::fs::read_dir(path).map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!("cannot list the directory {}: {e}", path.display()),
            )
        })?;
        let mut found: Vec<PathBuf> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with(INDEX_SUFFIX))
            })
            .collect();
        found.sort();
        return match found.len() {
            1 => Ok(found.pop()),
            0 => Err(Error::new(
                ErrorKind::Io,
                format!(
                    "{} is a directory without a *{INDEX_SUFFIX} (a sharded checkpoint's index); open a file",
                    path.display()
                ),
            )),
            _ => Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "the directory {} holds {} index files ({}); open one of them",
                    path.display(),
                    found.len(),
                    found
                        .iter()
                        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        };
    }
    Ok(is_index(path).then(|| path.to_path_buf()))
}

fn content(detail: impl Into<String>) -> Error {
    Error::new(ErrorKind::ContentInvalid, detail)
}

/// Parse the index text `bytes`.
pub(crate) fn parse(bytes: &[u8]) -> Result<Index> {
    if bytes.len() as u64 > MAX_INDEX {
        return Err(content(format!(
            "the index is {} bytes, above the {MAX_INDEX}-byte cap",
            bytes.len()
        )));
    }
    let text = Json::text(bytes, 0, "the index")?;
    let v = parse_value(text, 0, 64)?;
    let Value::Object(members) = v else {
        return Err(content("the index is not a JSON object"));
    };
    let mut shards: Vec<String> = Vec::new();
    let mut weight_map = Vec::new();
    let mut metadata = Vec::new();
    let mut seen_map = false;
    for (k, v) in members {
        match k.as_str() {
            "weight_map" => {
                seen_map = true;
                let Value::Object(m) = v else {
                    return Err(content("the index's \"weight_map\" is not an object"));
                };
                let mut by_name = std::collections::HashMap::new();
                for (tensor, file) in m {
                    let Value::String(file) = file else {
                        return Err(content(format!(
                            "the index's \"weight_map\" gives tensor {tensor:?} no file name (a string)"
                        )));
                    };
                    check_shard_name(&file, &tensor)?;
                    let next = shards.len();
                    let j = *by_name.entry(file.clone()).or_insert(next);
                    if j == next {
                        shards.push(file);
                    }
                    let j = u32::try_from(j)
                        .map_err(|_| Error::new(ErrorKind::Overflow, "more than 2^32 shards"))?;
                    weight_map.push((tensor, j));
                }
            }
            "metadata" => match v {
                Value::Object(m) => {
                    metadata = m.into_iter().map(|(k, v)| (k, meta_of(v))).collect();
                }
                Value::Null => {}
                _ => return Err(content("the index's \"metadata\" is not an object")),
            },
            // Other members are ignored (as loaders ignore them).
            _ => {}
        }
    }
    if !seen_map {
        return Err(content("the index has no \"weight_map\""));
    }
    Ok(Index {
        shards,
        weight_map,
        metadata,
    })
}

/// A shard file name must stay in the index's directory.
fn check_shard_name(file: &str, tensor: &str) -> Result<()> {
    if file.is_empty()
        || file == "."
        || file == ".."
        || file.contains('/')
        || file.contains('\\')
        || file.contains('\0')
    {
        return Err(content(format!(
            "the index names {file:?} as the shard of tensor {tensor:?}: a shard must be a file name in the index's directory"
        )));
    }
    Ok(())
}

/// A JSON value of the index's metadata as a metadata value (`null` as an empty string, an
/// object as its JSON text).
fn meta_of(v: Value) -> MetaValue {
    match v {
        Value::Null => MetaValue::Str(String::new()),
        Value::Bool(b) => MetaValue::Bool(b),
        Value::Number(Number::UInt(u)) => MetaValue::UInt(u),
        Value::Number(Number::Int(i)) => MetaValue::Int(i),
        Value::Number(Number::Float(f)) => MetaValue::Float(f),
        Value::String(s) => MetaValue::Str(s),
        Value::Array(items) => MetaValue::Array(items.into_iter().map(meta_of).collect()),
        Value::Object(m) => MetaValue::Str(object_text(&m)),
    }
}

/// Compact JSON text of an object (for metadata, which has no object type).
fn object_text(m: &[(String, Value)]) -> String {
    fn esc(s: &str, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    fn val(v: &Value, out: &mut String) {
        match v {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Number(Number::UInt(u)) => out.push_str(&u.to_string()),
            Value::Number(Number::Int(i)) => out.push_str(&i.to_string()),
            Value::Number(Number::Float(f)) => out.push_str(&format!("{f:?}")),
            Value::String(s) => esc(s, out),
            Value::Array(items) => {
                out.push('[');
                for (i, it) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    val(it, out);
                }
                out.push(']');
            }
            Value::Object(m) => {
                out.push('{');
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    esc(k, out);
                    out.push(':');
                    val(v, out);
                }
                out.push('}');
            }
        }
    }
    let mut out = String::new();
    val(&Value::Object(m.to_vec()), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index() {
        let ix = parse(
            br#"{"metadata":{"total_size":40,"n":{"a":[1]}},"weight_map":{"b":"s2","a":"s1","c":"s2"}}"#,
        )
        .unwrap();
        assert_eq!(ix.shards, ["s2", "s1"]);
        assert_eq!(
            ix.weight_map,
            [
                ("b".to_string(), 0),
                ("a".to_string(), 1),
                ("c".to_string(), 0)
            ]
        );
        assert_eq!(ix.metadata[0], ("total_size".into(), MetaValue::UInt(40)));
        assert_eq!(ix.metadata[1].1, MetaValue::Str(r#"{"a":[1]}"#.into()));
    }

    #[test]
    fn hostile_indexes() {
        for (text, kind, says) in [
            (
                &br#"{"weight_map":{"a":"../x"}}"#[..],
                ErrorKind::ContentInvalid,
                "\"../x\"",
            ),
            (
                br#"{"weight_map":{"a":"d/x"}}"#,
                ErrorKind::ContentInvalid,
                "file name",
            ),
            (
                br#"{"weight_map":{"a":1}}"#,
                ErrorKind::ContentInvalid,
                "\"a\"",
            ),
            (
                br#"{"weight_map":{"a":"x","a":"y"}}"#,
                ErrorKind::DuplicateName,
                "\"a\"",
            ),
            (
                br#"{"metadata":{}}"#,
                ErrorKind::ContentInvalid,
                "weight_map",
            ),
            (br#"[1]"#, ErrorKind::ContentInvalid, "object"),
            (
                b"{\"weight_map\":{\"a\":\"x\xff\"}}",
                ErrorKind::ContentInvalid,
                "UTF-8",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.kind, kind, "{e}");
            assert!(e.detail.contains(says), "{e} lacks {says}");
        }
    }
}
