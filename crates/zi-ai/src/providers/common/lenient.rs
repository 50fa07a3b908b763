//! JSON scalars of provider events read leniently: a field of another type counts as absent,
//! the way `Value::as_str`, `as_u64` and `as_bool` read it, so one odd field never costs the
//! rest of its event. They decode in place (no intermediate `Value`), borrowing strings that
//! have no escapes.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A string, or `None` for a missing field or any other type.
#[derive(Debug, Default)]
pub(crate) struct MaybeStr<'a>(pub Option<Cow<'a, str>>);

impl<'a> MaybeStr<'a> {
    /// The string, or `""`.
    pub fn or_empty(self) -> String {
        self.0.map(Cow::into_owned).unwrap_or_default()
    }

    pub fn as_deref(&self) -> Option<&str> {
        self.0.as_deref()
    }

    pub fn into_owned(self) -> Option<String> {
        self.0.map(Cow::into_owned)
    }
}

/// A non-negative integer, or `None` for a missing field or any other type (floats included).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct MaybeU64(pub Option<u64>);

impl MaybeU64 {
    pub fn or_zero(self) -> u64 {
        self.0.unwrap_or(0)
    }
}

/// A boolean, or `None` for a missing field or any other type.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct MaybeBool(pub Option<bool>);

/// Which scalar a [`Scalar`] visitor keeps; every other value is skipped.
enum Kept<'a> {
    Str(Cow<'a, str>),
    U64(u64),
    Bool(bool),
    Other,
}

struct Scalar;

impl<'de> Visitor<'de> for Scalar {
    type Value = Kept<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E: de::Error>(self, value: &'de str) -> Result<Kept<'de>, E> {
        Ok(Kept::Str(Cow::Borrowed(value)))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Kept<'de>, E> {
        Ok(Kept::Str(Cow::Owned(value.to_string())))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Kept<'de>, E> {
        Ok(Kept::Str(Cow::Owned(value)))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Kept<'de>, E> {
        Ok(Kept::U64(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Kept<'de>, E> {
        Ok(u64::try_from(value).map_or(Kept::Other, Kept::U64))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Kept<'de>, E> {
        Ok(Kept::Other)
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Kept<'de>, E> {
        Ok(Kept::Bool(value))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Kept<'de>, E> {
        Ok(Kept::Other)
    }

    fn visit_none<E: de::Error>(self) -> Result<Kept<'de>, E> {
        Ok(Kept::Other)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Kept<'de>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Kept::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Kept<'de>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Kept::Other)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for MaybeStr<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(MaybeStr(match deserializer.deserialize_any(Scalar)? {
            Kept::Str(text) => Some(text),
            _ => None,
        }))
    }
}

impl<'de> Deserialize<'de> for MaybeU64 {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(MaybeU64(match deserializer.deserialize_any(Scalar)? {
            Kept::U64(number) => Some(number),
            _ => None,
        }))
    }
}

impl<'de> Deserialize<'de> for MaybeBool {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(MaybeBool(match deserializer.deserialize_any(Scalar)? {
            Kept::Bool(value) => Some(value),
            _ => None,
        }))
    }
}

/// For `#[serde(default, deserialize_with = "present")]`: `Some` whenever the field is there,
/// `null` included, as `Value::get` sees it.
pub(crate) fn present<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<serde_json::Value>, D::Error> {
    serde_json::Value::deserialize(deserializer).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Sample<'a> {
        #[serde(borrow, default)]
        text: MaybeStr<'a>,
        #[serde(default)]
        count: MaybeU64,
        #[serde(default)]
        flag: MaybeBool,
        #[serde(default, deserialize_with = "present")]
        args: Option<serde_json::Value>,
    }

    fn read(
        json: &str,
    ) -> (
        Option<String>,
        Option<u64>,
        Option<bool>,
        Option<serde_json::Value>,
    ) {
        let sample: Sample<'_> = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}"));
        (
            sample.text.into_owned(),
            sample.count.0,
            sample.flag.0,
            sample.args,
        )
    }

    #[test]
    fn other_types_read_as_absent() {
        assert_eq!(
            read(r#"{"text":"a\"b","count":3,"flag":true,"args":null}"#),
            (
                Some("a\"b".into()),
                Some(3),
                Some(true),
                Some(serde_json::Value::Null)
            )
        );
        assert_eq!(
            read(r#"{"text":{"x":[1]},"count":-1,"flag":"yes"}"#),
            (None, None, None, None)
        );
        assert_eq!(
            read(r#"{"text":null,"count":2.0,"flag":[]}"#),
            (None, None, None, None)
        );
    }
}
