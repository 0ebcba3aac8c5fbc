//! The zero value of a Rust type, as JSON: what a field the API server
//! left out means to a defaulter, the way a Go defaulter sees `""`, `0`
//! or `false` where the object says nothing.
//!
//! A [`Zero`] deserializer answers every request of a `Deserialize` impl
//! with the zero of what it asks for: `""`, `0`, `false`, `None`, no map
//! entries, the first variant of an enum, and every field of a struct.
//! Sequences hold one zero element, so that the skeleton also describes
//! the elements of a list; recursion is cut off at [`MAX_DEPTH`].

use std::fmt;

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, EnumAccess, IntoDeserializer, MapAccess,
    SeqAccess, VariantAccess, Visitor,
};
use serde::{Serialize, forward_to_deserialize_any};
use serde_json::Value;

/// How deep a skeleton goes: deeper sequences are empty, deeper structs
/// are refused.
const MAX_DEPTH: usize = 32;

/// The error of a type that has no zero value (an untagged enum, a
/// string that must parse, a struct nested too deep).
#[derive(Debug)]
pub(crate) struct NoZero(String);

impl fmt::Display for NoZero {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NoZero {}

impl de::Error for NoZero {
    fn custom<T: fmt::Display>(message: T) -> Self {
        NoZero(message.to_string())
    }
}

/// `T`'s zero value as the JSON `T` serialises it to, or `None` when `T`
/// has no zero value.
pub(crate) fn skeleton<T: DeserializeOwned + Serialize>() -> Option<Value> {
    let zero = T::deserialize(Zero { depth: 0 }).ok()?;
    serde_json::to_value(zero).ok()
}

/// Answers every request with its zero.
#[derive(Clone, Copy)]
struct Zero {
    depth: usize,
}

impl Zero {
    fn deeper(self) -> Result<Zero, NoZero> {
        if self.depth >= MAX_DEPTH {
            return Err(NoZero(format!("nested deeper than {MAX_DEPTH} levels")));
        }
        Ok(Zero {
            depth: self.depth + 1,
        })
    }
}

impl<'de> Deserializer<'de> for Zero {
    type Error = NoZero;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NoZero> {
        visitor.visit_unit()
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NoZero> {
        visitor.visit_bool(false)
    }

    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NoZero> {
        visitor.visit_i8(0)
    }

    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NoZero> {
        visitor.visit_i16(0)
    }

    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NoZero> {
        visitor.visit_i32(0)
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NoZero> {
        visitor.visit_i64(0)
    }

    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NoZero> {
        visitor.visit_u8(0)
    }

    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NoZero> {
        visitor.visit_u16(0)
    }

    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NoZero> {
        visitor.visit_u32(0)
    }

    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NoZero> {
        visitor.visit_u64(0)
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NoZero> {
        visitor.visit_f32(0.0)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NoZero> {
        visitor.visit_f64(0.0)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NoZero> {
        visitor.visit_str("")
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NoZero> {
        visitor.visit_str("")
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NoZero> {
        visitor.visit_bytes(&[])
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NoZero> {
        visitor.visit_bytes(&[])
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NoZero> {
        visitor.visit_none()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, NoZero> {
        visitor.visit_newtype_struct(self.deeper()?)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NoZero> {
        let len = usize::from(self.depth + 1 < MAX_DEPTH);
        visitor.visit_seq(Zeros {
            zero: Zero {
                depth: self.depth + 1,
            },
            left: len,
        })
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, NoZero> {
        visitor.visit_seq(Zeros {
            zero: self.deeper()?,
            left: len,
        })
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, NoZero> {
        self.deserialize_tuple(len, visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, NoZero> {
        visitor.visit_map(Fields {
            zero: self,
            fields: &[],
        })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, NoZero> {
        visitor.visit_map(Fields {
            zero: self.deeper()?,
            fields,
        })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, NoZero> {
        let Some(first) = variants.first() else {
            return Err(NoZero(format!("enum {name} has no variant")));
        };
        visitor.visit_enum(FirstVariant {
            zero: self.deeper()?,
            name: first,
        })
    }

    forward_to_deserialize_any! { char unit unit_struct identifier ignored_any }
}

/// `left` zero elements.
struct Zeros {
    zero: Zero,
    left: usize,
}

impl<'de> SeqAccess<'de> for Zeros {
    type Error = NoZero;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, NoZero> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(self.zero).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.left)
    }
}

/// Every field of a struct, each zero.
struct Fields {
    zero: Zero,
    fields: &'static [&'static str],
}

impl<'de> MapAccess<'de> for Fields {
    type Error = NoZero;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, NoZero> {
        let Some((first, rest)) = self.fields.split_first() else {
            return Ok(None);
        };
        self.fields = rest;
        seed.deserialize(first.into_deserializer()).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, NoZero> {
        seed.deserialize(self.zero)
    }
}

/// An enum's first variant, its content zero.
struct FirstVariant {
    zero: Zero,
    name: &'static str,
}

impl<'de> EnumAccess<'de> for FirstVariant {
    type Error = NoZero;
    type Variant = Zero;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Zero), NoZero> {
        let variant = seed.deserialize(self.name.into_deserializer())?;
        Ok((variant, self.zero))
    }
}

impl<'de> VariantAccess<'de> for Zero {
    type Error = NoZero;

    fn unit_variant(self) -> Result<(), NoZero> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, NoZero> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, NoZero> {
        self.deserialize_tuple(len, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, NoZero> {
        self.deserialize_struct("", fields, visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Spec {
        message: String,
        shard_count: i32,
        enabled: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
        items: Vec<Item>,
        mode: Mode,
        labels: std::collections::BTreeMap<String, String>,
    }

    #[derive(Serialize, Deserialize)]
    struct Item {
        name: String,
    }

    #[derive(Serialize, Deserialize)]
    enum Mode {
        Fast,
        Slow,
    }

    #[derive(Serialize, Deserialize)]
    struct Tree {
        children: Vec<Tree>,
    }

    #[test]
    fn skeleton_holds_the_zero_of_every_field() {
        let zero = skeleton::<Spec>().unwrap();
        assert_eq!(
            zero,
            json!({"message": "", "shardCount": 0, "enabled": false,
                   "items": [{"name": ""}], "mode": "Fast", "labels": {}})
        );
    }

    #[test]
    fn skeleton_of_a_recursive_type_ends() {
        let zero = skeleton::<Tree>().unwrap();
        assert!(zero.pointer("/children/0/children/0").is_some());
    }

    #[test]
    fn a_type_without_a_zero_has_no_skeleton() {
        #[derive(Serialize, Deserialize)]
        #[serde(untagged)]
        enum Either {
            A(String),
            B(i32),
        }
        assert!(skeleton::<Either>().is_none());
    }
}
