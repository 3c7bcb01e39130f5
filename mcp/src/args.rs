//! [`Args`]: tool arguments whose parse errors name the argument.
//!
//! serde's own message for `{"failure_rate": "half"}` is "invalid type: string "half", expected
//! f64", which does not say which argument was wrong; an agent (or its user) needs the field to
//! fix the call. The schema is the argument type's own.

use std::borrow::Cow;

use schemars::JsonSchema;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};

/// `T`, deserialized with the path of the failing field in the error (`backoff.factor: ...`).
#[derive(Clone, Debug)]
pub struct Args<T>(pub T);

impl<'de, T: DeserializeOwned> Deserialize<'de> for Args<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde_path_to_error::deserialize(d).map(Args).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner().to_string();
            // serde quotes the offending value or field name: cap it (and the path, which
            // names an unknown key).
            let message = if path == "." {
                inner
            } else {
                format!("{path}: {inner}")
            };
            D::Error::custom(crate::echo::clip(&message))
        })
    }
}

impl<T: JsonSchema> JsonSchema for Args<T> {
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        name: String,
        inner: Option<Inner>,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        factor: f64,
    }

    #[test]
    fn errors_name_the_field() {
        let e = serde_json::from_str::<Args<Outer>>(r#"{"name": "x", "inner": {"factor": "big"}}"#)
            .unwrap_err();
        assert!(
            e.to_string().starts_with("inner.factor: invalid type"),
            "{e}"
        );
        let e = serde_json::from_str::<Args<Outer>>(r#"{"name": 3}"#).unwrap_err();
        assert!(e.to_string().starts_with("name: "), "{e}");
        let e = serde_json::from_str::<Args<Outer>>(r#"{}"#).unwrap_err();
        assert!(e.to_string().contains("missing field `name`"), "{e}");
    }
}
