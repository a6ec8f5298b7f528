//! A manifest document's top level, read without building the rest: is it
//! null, an object (with its `kind` and `apiVersion` when they are strings),
//! or something else. [`super::decode`] checks this before decoding a Pod so
//! the common mistakes get a clear message, and so a multi-document file
//! costs no more than skimming its documents.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A document's top level as far as the manifest rules need it: null, an
/// object with its `kind` and `apiVersion` (when they are strings), or
/// anything else. Everything else in the document is skipped, not built.
pub(super) enum Head {
    Null,
    Object {
        kind: Option<String>,
        api_version: Option<String>,
    },
    Other,
}

/// A mapping key, as far as [`Head`] cares.
enum HeadKey {
    Kind,
    ApiVersion,
    Other,
}

/// A string value, or `None` for anything else (skipped).
struct MaybeStr(Option<String>);

/// One visitor for the three: `Head` for documents, `HeadKey` for keys,
/// `MaybeStr` for values. Whatever a visitor does not want it skips.
struct Skim<T>(fn(Option<&str>) -> T, fn() -> T);

impl<'de, T> Visitor<'de> for Skim<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any value")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        Ok((self.0)(Some(v)))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<T, E> {
        Ok((self.0)(None))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<T, E> {
        Ok((self.0)(None))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<T, E> {
        Ok((self.0)(None))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<T, E> {
        Ok((self.0)(None))
    }
    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<T, E> {
        Ok((self.0)(None))
    }
    fn visit_unit<E: de::Error>(self) -> Result<T, E> {
        Ok((self.1)())
    }
    fn visit_none<E: de::Error>(self) -> Result<T, E> {
        Ok((self.1)())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<T, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok((self.0)(None))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok((self.0)(None))
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<T, A::Error> {
        de::VariantAccess::newtype_variant::<IgnoredAny>(data.variant::<IgnoredAny>()?.1)?;
        Ok((self.0)(None))
    }
}

impl<'de> Deserialize<'de> for HeadKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let key = |s: Option<&str>| match s {
            Some("kind") => HeadKey::Kind,
            Some("apiVersion") => HeadKey::ApiVersion,
            _ => HeadKey::Other,
        };
        d.deserialize_any(Skim(key, || HeadKey::Other))
    }
}

impl<'de> Deserialize<'de> for MaybeStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Skim(|s| MaybeStr(s.map(str::to_owned)), || MaybeStr(None)))
    }
}

impl<'de> Deserialize<'de> for Head {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Top;
        impl<'de> Visitor<'de> for Top {
            type Value = Head;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a Pod object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Head, A::Error> {
                let (mut kind, mut api_version) = (None, None);
                while let Some(key) = map.next_key::<HeadKey>()? {
                    match key {
                        HeadKey::Kind => kind = map.next_value::<MaybeStr>()?.0,
                        HeadKey::ApiVersion => api_version = map.next_value::<MaybeStr>()?.0,
                        HeadKey::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(Head::Object { kind, api_version })
            }
            fn visit_unit<E: de::Error>(self) -> Result<Head, E> {
                Ok(Head::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<Head, E> {
                Ok(Head::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Head, D::Error> {
                d.deserialize_any(self)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Head, E> {
                Ok(Head::Other)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Head, E> {
                Ok(Head::Other)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Head, E> {
                Ok(Head::Other)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Head, E> {
                Ok(Head::Other)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Head, E> {
                Ok(Head::Other)
            }
            fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<Head, E> {
                Ok(Head::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Head, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Head::Other)
            }
            fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Head, A::Error> {
                de::VariantAccess::newtype_variant::<IgnoredAny>(data.variant::<IgnoredAny>()?.1)?;
                Ok(Head::Other)
            }
        }
        d.deserialize_any(Top)
    }
}
