//! Deserializes a parsed TOML tree while remembering the dotted key path of every value, so a type error or an
//! unknown key is reported as `backends[1].tools.alow` rather than as a bare serde message.
//!
//! Rules: the innermost path wins (an error keeps the path of the value that raised it); errors raised while
//! reading a key are unknown-key errors, because the only key type that can reject a name is a
//! `deny_unknown_fields` struct's field list; date-times are refused, no setting is a date.
//!
//! Why not `serde_path_to_error`: its paths print keys raw (`headers.X Team`) where [`KeyPath`] quotes what TOML
//! cannot write bare (`headers."X Team"`), and it tells an unknown key from a wrong type only by the text of
//! serde's message, where this deserializer knows it from where the error was raised (reading a key).

use std::fmt;

use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, Unexpected, Visitor};

use super::error::ConfigError;
use super::fields::KeyPath;

/// A deserialization failure and the path of the value that caused it.
#[derive(Debug)]
pub(super) struct PathError {
    path: Option<KeyPath>,
    message: String,
    unknown_key: bool,
}

impl PathError {
    /// Attaches `path` unless a deeper value already claimed the error.
    fn at(mut self, path: &KeyPath) -> Self {
        if self.path.is_none() {
            self.path = Some(path.clone());
        }
        self
    }

    fn unknown_key_at(self, path: &KeyPath) -> Self {
        Self { unknown_key: true, ..self.at(path) }
    }

    pub(super) fn in_file(self, file: &str) -> ConfigError {
        let key = self.path.unwrap_or_default();
        if self.unknown_key {
            ConfigError::UnknownKey {
                file: file.to_owned(),
                expected: unknown_key_hint(&self.message),
                key: key.to_string(),
            }
        } else {
            ConfigError::WrongType { file: file.to_owned(), key: key.to_string(), message: self.message }
        }
    }
}

/// serde says "unknown field `x`, expected one of `a`, `b`"; the key is already named, so keep the useful half.
fn unknown_key_hint(message: &str) -> String {
    message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split_once("`, "))
        .map_or(message, |(_, hint)| hint)
        .to_owned()
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(path) => write!(f, "{path}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for PathError {}

impl de::Error for PathError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        Self { path: None, message: message.to_string(), unknown_key: false }
    }
}

/// Deserializes `T` from a whole parsed document.
pub(super) fn from_table<T: DeserializeOwned>(table: toml::Table) -> Result<T, PathError> {
    let root = toml::Value::Table(table);
    T::deserialize(Node { value: &root, path: KeyPath::root() })
}

/// One value of the tree, with its path.
struct Node<'a> {
    value: &'a toml::Value,
    path: KeyPath,
}

impl<'de> de::Deserializer<'de> for Node<'_> {
    type Error = PathError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, PathError> {
        let result = match self.value {
            toml::Value::String(text) => visitor.visit_str(text),
            toml::Value::Integer(number) => visitor.visit_i64(*number),
            toml::Value::Float(number) => visitor.visit_f64(*number),
            toml::Value::Boolean(flag) => visitor.visit_bool(*flag),
            toml::Value::Datetime(_) => Err(de::Error::invalid_type(Unexpected::Other("date-time"), &visitor)),
            toml::Value::Array(items) => visitor.visit_seq(Items { iter: items.iter().enumerate(), path: &self.path }),
            toml::Value::Table(table) => {
                visitor.visit_map(Entries { iter: table.iter(), pending: None, path: &self.path })
            }
        };
        result.map_err(|error| error.at(&self.path))
    }

    // A present value is never "none": TOML has no null, absence is handled by the struct's defaults.
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, PathError> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, PathError> {
        visitor.visit_newtype_struct(self)
    }

    // Settings enums are unit variants written as strings (`transport = "mcp"`).
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, PathError> {
        match self.value {
            toml::Value::String(text) => {
                let variant: de::value::StrDeserializer<'_, PathError> = text.as_str().into_deserializer();
                visitor.visit_enum(variant).map_err(|error| error.at(&self.path))
            }
            _ => self.deserialize_any(visitor),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit unit_struct
        seq tuple tuple_struct map struct identifier ignored_any
    }
}

struct Items<'a, 'p> {
    iter: std::iter::Enumerate<std::slice::Iter<'a, toml::Value>>,
    path: &'p KeyPath,
}

impl<'de> de::SeqAccess<'de> for Items<'_, '_> {
    type Error = PathError;

    fn next_element_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<Option<S::Value>, PathError> {
        self.iter
            .next()
            .map(|(index, value)| seed.deserialize(Node { value, path: self.path.index(index) }))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

struct Entries<'a, 'p> {
    iter: toml::map::Iter<'a>,
    pending: Option<(KeyPath, &'a toml::Value)>,
    path: &'p KeyPath,
}

impl<'de> de::MapAccess<'de> for Entries<'_, '_> {
    type Error = PathError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, PathError> {
        let Some((name, value)) = self.iter.next() else {
            return Ok(None);
        };
        let path = self.path.key(name);
        let key: de::value::StrDeserializer<'_, PathError> = name.as_str().into_deserializer();
        let parsed = seed.deserialize(key).map_err(|error| error.unknown_key_at(&path))?;
        self.pending = Some((path, value));
        Ok(Some(parsed))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, PathError> {
        let (path, value) =
            self.pending.take().ok_or_else(|| de::Error::custom("a value was requested before its key"))?;
        seed.deserialize(Node { value, path })
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        #[serde(default)]
        inner: Vec<Inner>,
        #[serde(default)]
        map: BTreeMap<String, u16>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        name: Option<String>,
        kind: Option<Kind>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "lowercase")]
    enum Kind {
        Plain,
    }

    fn error_of(text: &str) -> String {
        let table: toml::Table = text.parse().expect("valid TOML");
        from_table::<Outer>(table).expect_err("should fail").in_file("t.toml").to_string()
    }

    #[test]
    fn good_input_deserializes() {
        let table: toml::Table = "map.a = 1\n[[inner]]\nname = \"x\"\nkind = \"plain\"\n".parse().expect("valid TOML");
        let outer: Outer = from_table(table).expect("valid");
        assert_eq!(outer.inner[0].name.as_deref(), Some("x"));
        assert_eq!(outer.inner[0].kind, Some(Kind::Plain));
        assert_eq!(outer.map["a"], 1);
    }

    #[test]
    fn type_errors_name_the_innermost_key() {
        let message = error_of("[[inner]]\nname = \"a\"\n[[inner]]\nname = 5\n");
        assert_eq!(message, "t.toml: inner[1].name: invalid type: integer `5`, expected a string");
    }

    #[test]
    fn unknown_keys_are_named_with_their_path() {
        let message = error_of("[[inner]]\nnmae = \"a\"\n");
        assert_eq!(message, "t.toml: unknown key inner[0].nmae: expected `name` or `kind`");
        assert!(error_of("bogus = 1\n").contains("unknown key bogus"));
    }

    #[test]
    fn bad_enum_variants_name_the_key() {
        let message = error_of("[[inner]]\nkind = \"fancy\"\n");
        assert!(message.starts_with("t.toml: inner[0].kind: unknown variant `fancy`"));
    }

    #[test]
    fn map_values_and_dates_are_checked() {
        assert!(error_of("map.\"odd key\" = \"x\"\n").starts_with("t.toml: map.\"odd key\": invalid type"));
        assert!(error_of("[[inner]]\nname = 1979-05-27\n").contains("inner[0].name: invalid type: date-time"));
    }
}
