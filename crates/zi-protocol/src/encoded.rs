//! A value serialized once and spliced into frames as is.
//!
//! `session.get_state` is a hot, pipelined query while the snapshot changes only when the
//! session does, so the session keeps the snapshot's JSON and every response copies those bytes
//! instead of rebuilding and re-serializing the snapshot. `Encoded<T>` can only be made from a
//! `T`, so a response typed by the method table still carries exactly `T`'s wire form.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

/// The compact JSON of one `T`, shared cheaply between responses.
pub struct Encoded<T> {
    json: Arc<RawValue>,
    value: PhantomData<fn() -> T>,
}

impl<T: Serialize> Encoded<T> {
    /// Serializes `value` once.
    pub fn new(value: &T) -> Result<Encoded<T>, serde_json::Error> {
        let json: Arc<RawValue> = Arc::from(serde_json::value::to_raw_value(value)?);
        Ok(Encoded {
            json,
            value: PhantomData,
        })
    }
}

impl<T> Encoded<T> {
    /// The JSON text.
    pub fn json(&self) -> &str {
        self.json.get()
    }
}

impl<T> Clone for Encoded<T> {
    fn clone(&self) -> Self {
        Encoded {
            json: self.json.clone(),
            value: PhantomData,
        }
    }
}

impl<T> fmt::Debug for Encoded<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Encoded").field(&self.json.get()).finish()
    }
}

/// Written verbatim by `serde_json` (the raw-value protocol), so it costs a copy.
impl<T> Serialize for Encoded<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Sample {
        first_key: u32,
        text: &'static str,
    }

    #[test]
    fn an_encoded_value_serializes_to_the_same_bytes_as_the_value() {
        let sample = Sample {
            first_key: 7,
            text: "a \"quoted\" é",
        };
        let encoded = Encoded::new(&sample).unwrap_or_else(|e| panic!("{e}"));
        let direct = serde_json::to_string(&[&sample]).unwrap_or_else(|e| panic!("{e}"));
        let spliced = serde_json::to_string(&[&encoded]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(direct, spliced);
        assert_eq!(encoded.json(), &direct[1..direct.len() - 1]);
    }
}
