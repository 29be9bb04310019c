//! The committed C header `include/tensordesc.h` must be exactly what cbindgen generates
//! from `capi/src/` with `cbindgen.toml`. `TDESC_BLESS_HEADER=1` rewrites it.

#[test]
fn committed_header_is_fresh() {
    let root = crate::common::repo_root();
    let config = cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(root.join("capi/src/lib.rs"))
        .generate()
        .expect("cbindgen generates the header");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let generated = String::from_utf8(generated).expect("UTF-8 header");
    let path = root.join("include/tensordesc.h");
    if std::env::var_os("TDESC_BLESS_HEADER").is_some_and(|v| v == "1") {
        std::fs::write(&path, &generated).expect("write include/tensordesc.h");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != generated {
        let first = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(committed.lines().count().min(generated.lines().count()));
        panic!(
            "include/tensordesc.h is stale (first difference at line {}); regenerate with \
             TDESC_BLESS_HEADER=1 cargo test -p libtensordesc --test c_abi header_fresh",
            first + 1
        );
    }
}

#[test]
fn header_declares_the_contract() {
    let root = crate::common::repo_root();
    let h = std::fs::read_to_string(root.join("include/tensordesc.h")).expect("header");
    for needle in [
        "#ifndef TENSORDESC_H",
        "extern \"C\"",
        "#define TDESC_ABI_VERSION 1",
        "#define TDESC_MAX_RANK 64",
        "#define TDESC_NO_REGION UINT32_MAX",
        "TDESC_OK = 0,",
        "TDESC_ERR_REGION_OVERLAP = 20,",
        "TDESC_ERR_INTERNAL = 39,",
        "#define TDESC_MODE_STRICT 0",
        "#define TDESC_MODE_PERMISSIVE 1",
        "tdesc_status tdesc_descriptor_decode(const uint8_t *bytes,",
        "tdesc_status tdesc_descriptor_encode(const tdesc_descriptor *d,",
        "void tdesc_descriptor_free(tdesc_descriptor *d);",
        "uint8_t tdesc_descriptor_rank(const tdesc_descriptor *d);",
        "const uint64_t *tdesc_descriptor_shape(const tdesc_descriptor *d);",
        "size_t tdesc_descriptor_buffer_count(const tdesc_descriptor *d);",
        "size_t tdesc_descriptor_region_count(const tdesc_descriptor *d);",
        "tdesc_status tdesc_descriptor_locate(const tdesc_descriptor *d,",
        "const char *tdesc_last_error(void);",
        "uint32_t tdesc_abi_version(void);",
        "TDESC_LOCATION_DENSE",
        "TDESC_LOCATION_LOOKUP",
        "uint64_t local_index[TDESC_MAX_RANK];",
        "uint64_t origin[TDESC_MAX_RANK];",
    ] {
        assert!(h.contains(needle), "include/tensordesc.h lacks {needle:?}");
    }
}

/// The C header's `TDESC_LAYOUT_*` constants (literals, as cbindgen needs them) are
/// exactly the library's layout table, `tensordesc::layout::LAYOUTS`: the same names with
/// the same tags, none missing on either side, plus the extension range.
#[test]
fn header_layout_constants_are_the_layout_table() {
    use tensordesc::layout::{tag, tag_name, LAYOUTS};
    let root = crate::common::repo_root();
    let h = std::fs::read_to_string(root.join("include/tensordesc.h")).expect("header");
    let mut from_header: Vec<(String, u8)> = h
        .lines()
        .filter_map(|l| l.strip_prefix("#define TDESC_LAYOUT_"))
        .filter_map(|rest| {
            let (name, value) = rest.split_once(' ')?;
            Some((name.to_owned(), value.trim().parse().ok()?))
        })
        .collect();
    from_header.sort_by_key(|(_, t)| *t);
    let mut want: Vec<(String, u8)> = LAYOUTS
        .iter()
        .map(|l| (l.name.to_owned(), l.tag))
        .chain([
            ("EXTENSION_FIRST".to_owned(), tag::EXTENSION_FIRST),
            ("EXTENSION_LAST".to_owned(), tag::EXTENSION_LAST),
        ])
        .collect();
    want.sort_by_key(|(_, t)| *t);
    assert_eq!(from_header, want);
    for t in 0..=255u8 {
        let known = LAYOUTS.iter().find(|l| l.tag == t);
        match known {
            Some(l) => assert_eq!(tag_name(t), l.name),
            None => assert!(["EXTENSION", "UNKNOWN"].contains(&tag_name(t)), "{t}"),
        }
    }
}

/// The same for element types: the header's `TDESC_ELEMENT_*` literals are exactly
/// `ElementType::ALL` with their codes and names. (The Python package reads the library's
/// table at import, `_native._element_types`, and has no copy to compare.)
#[test]
fn header_element_types_are_the_library_table() {
    use tensordesc::ElementType;
    let root = crate::common::repo_root();
    let want: Vec<(String, u8)> = ElementType::ALL
        .iter()
        .map(|e| (e.name().to_owned(), e.code()))
        .collect();
    let h = std::fs::read_to_string(root.join("include/tensordesc.h")).expect("header");
    let mut from_header: Vec<(String, u8)> = h
        .lines()
        .filter_map(|l| l.strip_prefix("#define TDESC_ELEMENT_"))
        .filter_map(|rest| {
            let (name, value) = rest.split_once(' ')?;
            Some((name.to_owned(), value.trim().parse().ok()?))
        })
        .collect();
    from_header.sort_by_key(|(_, c)| *c);
    assert_eq!(from_header, want);
}
