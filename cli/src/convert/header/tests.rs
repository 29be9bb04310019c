use super::*;

fn err(h: &str) -> Error {
    parse(h.as_bytes()).unwrap_err()
}

#[test]
fn reads_tensors_in_data_order_with_their_shapes() {
    let h = parse(
        br#"{"b":{"dtype":"F32","shape":[2,300],"data_offsets":[0,2400]},
             "__metadata__":{"z":"1","a":"2"},
             "a\n\u001b":{"dtype":"U8","shape":[],"data_offsets":[2401,2402]},
             "e":{"dtype":"I64","shape":[0, 18446744073709551615],"data_offsets":[2400,2400], "extra":[{}]},
             "c":{"dtype":"F4","shape":[1,2],"data_offsets":[2400,2401]}}  "#,
    )
    .unwrap();
    let got: Vec<(&str, Vec<u64>, u64, u64)> = h
        .tensors()
        .iter()
        .map(|e| (h.name(e), h.shape(e), e.begin, e.len))
        .collect();
    assert_eq!(
        got,
        [
            ("b", vec![2, 300], 0, 2400),
            ("e", vec![0, u64::MAX], 2400, 0),
            ("c", vec![1, 2], 2400, 1),
            ("a\n\u{1b}", vec![], 2401, 1),
        ]
    );
    assert_eq!(h.data_len(), 2402);
    let mut h = h;
    let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
    assert_eq!(h.take_metadata(), vec![pair("a", "2"), pair("z", "1")]);
    assert_eq!(h.take_metadata(), vec![]);
    for empty in [r#"{"__metadata__":null}"#, r#"{"__metadata__":{}}"#, "{}"] {
        assert_eq!(parse(empty.as_bytes()).unwrap().take_metadata(), vec![]);
    }
    // The same pairs as serde_json gives, in sorted order.
    let tricky = r#"{"__metadata__":{"\u00e9\n":"\"q\"\u0001\/","\u0000":"\ud83d\ude00"}}"#;
    let want: std::collections::BTreeMap<String, String> = serde_json::from_value(
        serde_json::from_str::<serde_json::Value>(tricky).unwrap()["__metadata__"].clone(),
    )
    .unwrap();
    assert_eq!(
        parse(tricky.as_bytes()).unwrap().take_metadata(),
        want.into_iter().collect::<Vec<_>>()
    );
    assert_eq!(std::mem::size_of::<Entry>(), 32);
}

/// Malformed headers, each with a part of the error's detail that names what is wrong
/// (and the tensor, where there is one).
const MALFORMED: &[(&str, &str)] = &[
    (
        r#"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#,
        "tensor \"a\": data_offsets [0, 8] hold 8 bytes; shape [3] of F32 needs 12",
    ),
    (
        r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}"#,
        "end before they start",
    ),
    (
        r#"{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}"#,
        "does not fill whole bytes",
    ),
    (
        r#"{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}}"#,
        "overflows",
    ),
    (
        r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}}"#,
        "tensor \"b\": data_offsets [2, 3] should start at byte 1",
    ),
    (
        r#"{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}}"#,
        "tensor \"a\": \"shape\": invalid value",
    ),
    (
        r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}}"#,
        "tensor \"a\": \"data_offsets\": not two non-negative integers",
    ),
    (
        r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[1]}}"#,
        "tensor \"a\": \"data_offsets\": not two non-negative integers",
    ),
    (
        r#"{"a":{"dtype":"U8","shape":[1]}}"#,
        "tensor \"a\": missing field `data_offsets`",
    ),
    (
        r#"{"a":{"dtype":7,"shape":[1],"data_offsets":[0,1]}}"#,
        "tensor \"a\": \"dtype\": invalid type",
    ),
    (r#"{"a":[1]}"#, "tensor \"a\": invalid type: sequence"),
    (
        r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}"#,
        "tensor \"a\" appears twice",
    ),
    (
        r#"{"a":{"dtype":"U8","shape":[1],"shape":[1],"data_offsets":[0,1]}}"#,
        "duplicate field `shape`",
    ),
    (
        r#"{"__metadata__":{"k":1}}"#,
        "__metadata__ must be a JSON object whose values are strings",
    ),
    (
        r#"{"__metadata__":{"k":"1","k":"2"}}"#,
        "__metadata__ has the key \"k\" twice",
    ),
    (
        r#"{"__metadata__":{},"__metadata__":{}}"#,
        "the key \"__metadata__\" twice",
    ),
    (
        r#"{"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#,
        "empty name",
    ),
    (r#"[]"#, "not the JSON object safetensors expects"),
    (
        r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}} x"#,
        "trailing characters",
    ),
    (
        r#"{"a":{"dtype":"U8","shape":[1],"data_off"#,
        "tensor \"a\": EOF",
    ),
];

#[test]
fn errors_name_the_tensor() {
    let e = err(
        r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F2","shape":[1],"data_offsets":[8,9]}}"#,
    );
    assert_eq!(e.kind, ErrorKind::InvalidElementType);
    assert!(
        e.detail
            .starts_with("tensor \"b\": safetensors dtype \"F2\" is unknown"),
        "{}",
        e.detail
    );
    for (h, wants) in MALFORMED {
        let e = err(h);
        assert!(
            e.detail.contains(wants),
            "{h}: {wants:?} not in {:?}",
            e.detail
        );
    }
    // An ignored field nested deep: skipped without recursion, then a syntax error.
    let deep = format!("{{\"a\":{{\"x\":{}}}}}", "[".repeat(100_000));
    assert!(err(&deep)
        .detail
        .starts_with("tensor \"a\": expected value"));
    let rank65 = format!(
        r#"{{"a":{{"dtype":"U8","shape":[{}],"data_offsets":[0,1]}}}}"#,
        vec!["1"; 65].join(",")
    );
    assert_eq!(err(&rank65).kind, ErrorKind::RankTooLarge);
    assert!(err("\u{0}\u{ff}").detail.contains("JSON"));
    assert!(parse(b"{\"a\xff\":1}")
        .unwrap_err()
        .detail
        .contains("UTF-8"));
}

/// Every byte of a valid header replaced by each of a few others, and every prefix:
/// an error or a header, never a panic; a header's records are consistent.
#[test]
fn mutations_never_panic() {
    let good = br#"{"__metadata__":{"k":"v","j":"w"},"a":{"dtype":"F4","shape":[2,3],"data_offsets":[0,3]},"b\n":{"dtype":"U8","shape":[],"data_offsets":[3,4]},"c":{"dtype":"F64","shape":[0],"data_offsets":[3,3]}}"#;
    let check = |bytes: &[u8]| {
        if let Ok(mut h) = parse(bytes) {
            let mut at = 0;
            for e in h.tensors() {
                assert_eq!(e.begin, at);
                at += e.len;
                assert!(!h.name(e).is_empty());
                assert!(h.shape(e).len() <= MAX_RANK);
            }
            assert_eq!(at, h.data_len());
            let _ = h.take_metadata();
        }
    };
    for i in 0..good.len() {
        for b in [
            b'"', b'{', b'}', b'[', b']', b',', b':', b'0', b'9', b'-', b'a', b'\\', 0xff,
        ] {
            let mut m = good.to_vec();
            m[i] = b;
            check(&m);
        }
        check(&good[..i]);
    }
    assert_eq!(parse(good).unwrap().tensors().len(), 3);
}

#[test]
fn dims_round_trip() {
    let vals = [0, 1, 127, 128, 300, 1 << 35, u64::MAX - 1, u64::MAX];
    let mut dims = Vec::new();
    for v in vals {
        put_dim(&mut dims, v);
    }
    assert_eq!(shape_in(&dims, vals.len() as u8), vals);
}
