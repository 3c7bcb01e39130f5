//! Tool schemas in standard JSON Schema 2020-12: schemars marks Rust integer and float types
//! with formats of its own (`"format": "uint64"`, `"double"`), which are not in the
//! specification, and validators in other SDKs warn about them on every call. [`standard`]
//! drops every format the specification does not define and gives integers their range as
//! `minimum`/`maximum` instead (keeping a tighter bound already there).

use serde_json::{Map, Value, json};

/// The formats JSON Schema 2020-12 defines (its format-annotation vocabulary).
pub const STANDARD_FORMATS: [&str; 19] = [
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// The range of one of schemars' integer formats.
fn range(format: &str) -> Option<(Value, Value)> {
    Some(match format {
        "int8" => (json!(i8::MIN), json!(i8::MAX)),
        "int16" => (json!(i16::MIN), json!(i16::MAX)),
        "int32" => (json!(i32::MIN), json!(i32::MAX)),
        "int64" | "int" => (json!(i64::MIN), json!(i64::MAX)),
        "uint8" => (json!(0), json!(u8::MAX)),
        "uint16" => (json!(0), json!(u16::MAX)),
        "uint32" => (json!(0), json!(u32::MAX)),
        "uint64" | "uint" => (json!(0), json!(u64::MAX)),
        _ => return None,
    })
}

/// `bound` unless `current` is already tighter (`tighter(current, bound)`).
fn keep_tighter(current: Option<&Value>, bound: Value, tighter: fn(f64, f64) -> bool) -> Value {
    match (current.and_then(Value::as_f64), bound.as_f64()) {
        (Some(c), Some(b)) if tighter(c, b) => current.cloned().unwrap_or(bound),
        _ => bound,
    }
}

/// `schema` with every non-standard format replaced as the module says.
pub fn standard(schema: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Value::Object(schema.clone());
    rewrite(&mut out);
    match out {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn rewrite(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(format)) = m.get("format")
                && !STANDARD_FORMATS.contains(&format.as_str())
            {
                if let Some((min, max)) = range(format) {
                    let min = keep_tighter(m.get("minimum"), min, |c, b| c > b);
                    let max = keep_tighter(m.get("maximum"), max, |c, b| c < b);
                    m.insert("minimum".into(), min);
                    m.insert("maximum".into(), max);
                }
                m.remove("format");
            }
            m.values_mut().for_each(rewrite);
        }
        Value::Array(a) => a.iter_mut().for_each(rewrite),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_formats_become_ranges_and_other_formats_go() {
        let s = json!({
            "type": "object",
            "properties": {
                "seed": {"type": ["integer", "null"], "format": "uint64", "minimum": 0},
                "window": {"type": "integer", "format": "uint32", "minimum": 1, "maximum": 1000},
                "rate": {"type": "number", "format": "double"},
                "when": {"type": "string", "format": "date-time"},
                "format": {"type": "string"},
            }
        });
        let out = Value::Object(standard(s.as_object().unwrap()));
        let p = &out["properties"];
        assert_eq!(
            p["seed"],
            json!({"type": ["integer", "null"], "minimum": 0, "maximum": u64::MAX})
        );
        assert_eq!(
            p["window"],
            json!({"type": "integer", "minimum": 1, "maximum": 1000})
        );
        assert_eq!(p["rate"], json!({"type": "number"}));
        assert_eq!(p["when"]["format"], "date-time");
        assert_eq!(
            p["format"],
            json!({"type": "string"}),
            "a property named format stays"
        );
    }
}
