//! Where a field path is in a YAML document, so that an error about a
//! field (from `validate()`, the conversion, a cross-reference check) is
//! reported at its line and column.

use serde::Deserialize;
use serde_saphyr::Spanned;

/// A YAML document as a tree of positions, to find where a field path is.
pub(crate) enum Node {
    Map(Vec<(Spanned<Key>, Spanned<Node>)>),
    Seq(Vec<Spanned<Node>>),
    Leaf,
}

/// A mapping key as text (`8` and `"8"` alike).
pub(crate) struct Key(String);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a scalar key")
            }
            fn visit_str<E>(self, v: &str) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Node;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any YAML value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
                let mut entries = Vec::new();
                while let Some(k) = map.next_key::<Spanned<Key>>()? {
                    entries.push((k, map.next_value::<Spanned<Node>>()?));
                }
                Ok(Node::Map(entries))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
                let mut items = Vec::new();
                while let Some(n) = seq.next_element::<Spanned<Node>>()? {
                    items.push(n);
                }
                Ok(Node::Seq(items))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Node, E> {
                Ok(Node::Leaf)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Node, E> {
                Ok(Node::Leaf)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Node, E> {
                Ok(Node::Leaf)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Node, E> {
                Ok(Node::Leaf)
            }
            fn visit_str<E>(self, _: &str) -> Result<Node, E> {
                Ok(Node::Leaf)
            }
            fn visit_unit<E>(self) -> Result<Node, E> {
                Ok(Node::Leaf)
            }
            fn visit_none<E>(self) -> Result<Node, E> {
                Ok(Node::Leaf)
            }
        }
        d.deserialize_any(V)
    }
}

impl Node {
    /// Where `path` (`spec.resourceGroups[0].flavors[1].name`,
    /// `spec.nodeLabels[nvidia.com/gpu.product]`) is, or its deepest
    /// existing ancestor.
    pub(crate) fn locate(&self, path: &str) -> Option<serde_saphyr::Location> {
        let mut segments = Vec::new();
        let mut cur = String::new();
        let mut chars = path.chars();
        while let Some(c) = chars.next() {
            match c {
                '.' => segments.push(std::mem::take(&mut cur)),
                '[' => {
                    segments.push(std::mem::take(&mut cur));
                    segments.push(chars.by_ref().take_while(|&c| c != ']').collect());
                }
                c => cur.push(c),
            }
        }
        segments.push(cur);
        let mut node = self;
        let mut found = None;
        for seg in segments.iter().filter(|s| !s.is_empty()) {
            match node {
                Node::Map(entries) => match entries.iter().find(|(k, _)| k.value.0 == *seg) {
                    Some((k, v)) => {
                        found = Some(k.referenced);
                        node = &v.value;
                    }
                    None => break,
                },
                Node::Seq(items) => match seg.parse::<usize>().ok().and_then(|i| items.get(i)) {
                    Some(item) => {
                        found = Some(item.referenced);
                        node = &item.value;
                    }
                    None => break,
                },
                Node::Leaf => break,
            }
        }
        found
    }
}
