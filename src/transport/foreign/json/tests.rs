//! Unit tests of the JSON reader.

use super::*;

fn parse(s: &str) -> Result<Value> {
    parse_value(s, 0, 16)
}

#[test]
fn values_of_every_kind() {
    let v = parse(r#" {"a": [1, -2, 3.5, 1e3, 18446744073709551616], "b": {"c": null, "d": true, "e": false}, "s": "x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"} "#).unwrap();
    let a = v.get("a").unwrap();
    assert_eq!(
        a,
        &Value::Array(vec![
            Value::Number(Number::UInt(1)),
            Value::Number(Number::Int(-2)),
            Value::Number(Number::Float(3.5)),
            Value::Number(Number::Float(1000.0)),
            Value::Number(Number::Float(18446744073709551616.0)),
        ])
    );
    assert_eq!(
        v.get("s").unwrap().as_str(),
        Some("x\"\\/\u{8}\u{c}\n\r\té😀")
    );
    assert_eq!(v.get("b").unwrap().get("d"), Some(&Value::Bool(true)));
    assert_eq!(parse("[]").unwrap(), Value::Array(vec![]));
    assert_eq!(parse("{}").unwrap(), Value::Object(vec![]));
    assert_eq!(parse("[[],{},[{}]]").unwrap().get("x"), None);
    assert_eq!(parse("-0").unwrap(), Value::Number(Number::UInt(0)));
}

#[test]
fn integers_at_the_digit_count_boundaries() {
    for (s, want) in [
        ("0", Number::UInt(0)),
        (
            "9999999999999999999",
            Number::UInt(9_999_999_999_999_999_999),
        ),
        (
            "10000000000000000000",
            Number::UInt(10_000_000_000_000_000_000),
        ),
        ("18446744073709551615", Number::UInt(u64::MAX)),
        (
            "18446744073709551616",
            Number::Float(18446744073709551616.0),
        ),
        ("99999999999999999999", Number::Float(1e20)),
        ("-9223372036854775808", Number::Int(i64::MIN)),
        ("12e0", Number::Float(12.0)),
        ("12.0", Number::Float(12.0)),
    ] {
        assert_eq!(parse(s).unwrap(), Value::Number(want), "{s}");
    }
}

#[test]
fn malformed_text_names_the_byte() {
    for (s, at) in [
        ("{", 1),
        ("[1,]", 3),
        ("[1 2]", 3),
        ("{\"a\" 1}", 5),
        ("{\"a\":1,}", 7),
        ("\"abc", 0),
        ("\"a\u{1}\"", 2),
        ("\"\\x\"", 1),
        ("\"\\ud800\"", 1),
        ("\"\\udc00\"", 1),
        ("\"\\ud800\\u0041\"", 7),
        ("\"\\u12\"", 1),
        ("01", 0),
        ("1.", 2),
        ("1e", 2),
        ("-", 1),
        ("tru", 0),
        ("[1] x", 4),
        ("", 0),
    ] {
        let e = parse(s).unwrap_err();
        assert_eq!(e.kind, ErrorKind::ContentInvalid, "{s:?}: {e}");
        assert_eq!(e.offset, Some(at), "{s:?}: {e}");
    }
}

#[test]
fn nesting_is_limited_without_recursion() {
    let deep = "[".repeat(17) + &"]".repeat(17);
    let e = parse(&deep).unwrap_err();
    assert_eq!(e.kind, ErrorKind::ContentInvalid);
    assert!(e.detail.contains("deeper than 16"), "{e}");
    assert!(parse(&("[".repeat(16) + &"]".repeat(16))).is_ok());
    // skip_value: a million levels are refused at the limit, not walked.
    let bomb = "[".repeat(1_000_000);
    let mut j = Json::new(&bomb, 8, 64);
    let e = j.skip_value().unwrap_err();
    assert_eq!(e.offset, Some(8 + 64));
}

#[test]
fn duplicate_keys_are_named() {
    let e = parse(r#"{"a":1,"b":{"x":1,"x":2}}"#).unwrap_err();
    assert_eq!(e.kind, ErrorKind::DuplicateName);
    assert!(e.detail.contains("\"x\""), "{e}");
    assert_eq!(e.offset, Some(18));
}

#[test]
fn skip_value_skips_any_shape() {
    let text =
        r#"{"a": [1, {"b": [[], {}, "x\"]"]}, "c"], "d": {"e": {"f": [true, null]}}, "g": 5} 7"#;
    let mut j = Json::new(text, 0, 8);
    j.skip_value().unwrap();
    assert_eq!(j.number().unwrap(), Number::UInt(7));
    j.finish().unwrap();
    let text = r#"[{"k": [1, "a", {"x": ["b", "c"]}]}, ["d", "e"], {"y": "z"}], 3"#;
    let mut j = Json::new(text, 0, 8);
    j.begin_array().unwrap();
    assert!(j.next_item().unwrap());
    j.skip_value().unwrap();
    assert!(j.next_item().unwrap());
    j.skip_value().unwrap();
    assert!(j.next_item().unwrap());
    j.skip_value().unwrap();
    assert!(!j.next_item().unwrap());
}

#[test]
fn non_utf8_is_named() {
    let e = Json::text(b"{\"a\xff\"}", 8, "the header").unwrap_err();
    assert_eq!(e.kind, ErrorKind::ContentInvalid);
    assert_eq!(e.offset, Some(11));
}
