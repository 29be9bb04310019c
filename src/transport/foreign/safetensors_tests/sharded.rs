//! Sharded checkpoints: the index and its shards read as one file, and the index held to
//! what the shards hold.

use super::*;
use crate::transport::foreign::{Container, MetaValue};

/// A scratch directory removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("tdesc-shards-{}-{tag}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Two shards written by the safetensors crate and their index.
fn two_shards(dir: &std::path::Path, index: &str) {
    let a = f32s(&[1.0, 2.0, 3.0]);
    let b = vec![7u8, 8, 9, 10, 11];
    let c = f32s(&[-1.0, -2.0]);
    std::fs::write(
        dir.join("model-00001-of-00002.safetensors"),
        produced(
            &[("a", St::F32, vec![3], a), ("b", St::U8, vec![5], b)],
            &[("format", "pt")],
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("model-00002-of-00002.safetensors"),
        produced(&[("c", St::F32, vec![2], c)], &[("format", "pt")]),
    )
    .unwrap();
    std::fs::write(dir.join("model.safetensors.index.json"), index).unwrap();
}

const INDEX: &str = r#"{"metadata": {"total_size": 25}, "weight_map": {
    "a": "model-00001-of-00002.safetensors",
    "b": "model-00001-of-00002.safetensors",
    "c": "model-00002-of-00002.safetensors"}}"#;

#[test]
fn a_sharded_checkpoint_is_one_file() {
    let s = Scratch::new("ok");
    two_shards(&s.0, INDEX);
    for path in [s.0.clone(), s.0.join("model.safetensors.index.json")] {
        let r = FileReader::open(&path, Mode::Strict).unwrap();
        assert_eq!(r.container(), Container::ShardedSafetensors);
        assert_eq!(r.len(), 3);
        assert_eq!(r.as_bytes().len(), 0);
        assert!(r.source_len() > 4096);
        assert_eq!(
            r.get("a").unwrap().bound().unwrap().get_f64(&[2]).unwrap(),
            3.0
        );
        assert_eq!(r.get("b").unwrap().buffer(0).unwrap(), &[7, 8, 9, 10, 11]);
        assert_eq!(r.get("b").unwrap().data(), &[7, 8, 9, 10, 11]);
        let c = r.get("c").unwrap();
        assert_eq!(c.bound().unwrap().get_f64(&[1]).unwrap(), -2.0);
        // Shard 2's tensor lies past a page boundary in the virtual offsets.
        assert!(c.data_range().start >= 4096);
        assert_eq!(
            r.metadata(),
            &[
                ("total_size".to_string(), MetaValue::UInt(25)),
                ("format".to_string(), MetaValue::Str("pt".into())),
            ]
        );
        for e in r.entries() {
            let d = e.descriptor().unwrap();
            let h = d.effective_buffer(0).unwrap();
            assert_eq!(
                e.buffer(0).unwrap().as_ptr() as usize % h.alignment() as usize,
                0
            );
        }
    }
}

#[test]
fn a_sharded_index_must_agree_with_its_shards() {
    use crate::ErrorKind as K;
    let case = |tag: &str, index: &str, mode: Mode| {
        let s = Scratch::new(tag);
        two_shards(&s.0, index);
        FileReader::open(&s.0, mode).map(|r| r.len())
    };
    // A tensor the index names but its shard lacks.
    let missing = INDEX.replace(r#""c": "model-00002"#, r#""d": "model-00002"#);
    let e = case("missing", &missing, Mode::Permissive).unwrap_err();
    assert_eq!(e.kind, K::ContentInvalid, "{e}");
    assert!(e.detail.contains("\"d\""), "{e}");
    // The wrong shard.
    let wrong = INDEX.replace(
        r#""b": "model-00001-of-00002.safetensors""#,
        r#""b": "model-00002-of-00002.safetensors""#,
    );
    let e = case("wrong", &wrong, Mode::Strict).unwrap_err();
    assert_eq!(e.kind, K::ContentInvalid, "{e}");
    assert!(e.detail.contains("\"b\""), "{e}");
    // A shard tensor the index does not name: strict refuses, permissive keeps.
    let partial = r#"{"weight_map": {"a": "model-00001-of-00002.safetensors",
        "c": "model-00002-of-00002.safetensors"}}"#;
    let e = case("extra", partial, Mode::Strict).unwrap_err();
    assert!(e.detail.contains("\"b\""), "{e}");
    assert_eq!(case("extra2", partial, Mode::Permissive).unwrap(), 3);
    // A shard outside the directory; a shard that is not there.
    let e = case(
        "escape",
        r#"{"weight_map": {"a": "../x.safetensors"}}"#,
        Mode::Strict,
    )
    .unwrap_err();
    assert_eq!(e.kind, K::ContentInvalid, "{e}");
    let e = case(
        "gone",
        r#"{"weight_map": {"a": "nope.safetensors"}}"#,
        Mode::Strict,
    )
    .unwrap_err();
    assert_eq!(e.kind, K::Io, "{e}");
    assert!(e.detail.contains("nope.safetensors"), "{e}");
    // A directory without an index, and one with two.
    let s = Scratch::new("none");
    assert_eq!(
        FileReader::open(&s.0, Mode::Strict).unwrap_err().kind,
        K::Io
    );
    two_shards(&s.0, INDEX);
    std::fs::write(s.0.join("other.safetensors.index.json"), INDEX).unwrap();
    assert_eq!(
        FileReader::open(&s.0, Mode::Strict).unwrap_err().kind,
        K::InvalidArgument
    );
}
