//! Accounting for every key of a Kueue object: each leaf is decided by the
//! mapping table ([`crate::mapping::decide`]); a leaf that maps onto a
//! Sluice field is kept (and the object rebuilt from what is kept), every
//! other one is noted with its path unless the table calls it not
//! configuration. A key the table does not know is noted as unknown, at the
//! highest level where it is unknown.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::Note;
use crate::mapping::{self, Row, Status};

/// One step of a path: an object key or a list index.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

/// What a walk found.
pub(crate) struct Walked {
    /// The object rebuilt from the leaves that map onto a Sluice field.
    pub(crate) kept: Value,
    pub(crate) notes: Vec<Note>,
}

/// Walks `doc`, a Kueue object of `kind` at `version`; notes are placed at
/// `place: path` (`ClusterQueue team-a: spec.admissionChecks`). The
/// top-level `apiVersion` and `kind` are the caller's.
pub(crate) fn walk(kind: &str, version: &str, place: &str, doc: &Value) -> Walked {
    let mut w = Walker {
        kind,
        version,
        place,
        kept: Value::Object(Map::new()),
        notes: Vec::new(),
        said: BTreeSet::new(),
    };
    if let Value::Object(top) = doc {
        for (key, value) in top {
            if key != "apiVersion" && key != "kind" {
                w.visit(value, &mut vec![Seg::Key(key.clone())]);
            }
        }
    }
    compact(&mut w.kept);
    Walked {
        kept: w.kept,
        notes: w.notes,
    }
}

struct Walker<'a> {
    kind: &'a str,
    version: &'a str,
    place: &'a str,
    kept: Value,
    notes: Vec<Note>,
    /// Places already noted, so a list of unsupported entries is said once.
    said: BTreeSet<String>,
}

impl Walker<'_> {
    fn visit(&mut self, value: &Value, segs: &mut Vec<Seg>) {
        let path = abstract_path(segs);
        match value {
            Value::Null => {}
            Value::Object(m) if !m.is_empty() && mapping::known_container(self.kind, self.version, &path) => {
                for (key, v) in m {
                    segs.push(Seg::Key(key.clone()));
                    self.visit(v, segs);
                    segs.pop();
                }
            }
            Value::Array(a) if !is_leaf(value) && mapping::known_container(self.kind, self.version, &path) => {
                for (i, v) in a.iter().enumerate() {
                    segs.push(Seg::Index(i));
                    self.visit(v, segs);
                    segs.pop();
                }
            }
            _ => self.leaf(value, segs, &path),
        }
    }

    /// A scalar, an empty object or list, a list of scalars, or a subtree
    /// no row lies inside.
    fn leaf(&mut self, value: &Value, segs: &[Seg], path: &str) {
        let scalar = scalar_text(value);
        match mapping::decide(self.kind, self.version, path, scalar.as_deref()) {
            Some(row) => self.apply(row, value, segs),
            None if is_empty(value) && mapping::known_container(self.kind, self.version, path) => {}
            None => {
                let message = match scalar {
                    Some(v) if mapping::known_container(self.kind, self.version, path) => {
                        format!("value {v:?} is not one Kueue or Sluice knows here: not copied")
                    }
                    _ => "unknown field: not copied".to_string(),
                };
                self.note(concrete_path(segs), Status::Unsupported, message);
            }
        }
    }

    fn apply(&mut self, row: &'static Row, value: &Value, segs: &[Seg]) {
        let node = concrete_path(&segs[..segments(row.kueue).min(segs.len())]);
        match row.status {
            Status::Mapped | Status::Difference => {
                if is_field(row.sluice) {
                    put(&mut self.kept, segs, value.clone());
                }
                if row.status == Status::Difference {
                    self.note(node, row.status, row.note.to_string());
                }
            }
            Status::Unsupported => self.note(node, row.status, not_copied(row)),
            Status::Ignored => {}
        }
    }

    fn note(&mut self, path: String, status: Status, message: String) {
        let place = if path.is_empty() {
            self.place.to_string()
        } else {
            format!("{}: {path}", self.place)
        };
        if self.said.insert(place.clone()) {
            self.notes.push(Note { place, status, message });
        }
    }
}

/// An unsupported row's note, as the importer says it.
pub(crate) fn not_copied(row: &Row) -> String {
    format!("not copied: {}", row.note)
}

/// Whether a row's Sluice side is a field of the object (copied), rather
/// than prose (`what Sluice always does`) or a flag.
fn is_field(sluice: &str) -> bool {
    !sluice.is_empty() && !sluice.contains([' ', '`']) && !sluice.starts_with("--")
}

fn is_empty(v: &Value) -> bool {
    v.as_object().is_some_and(Map::is_empty) || v.as_array().is_some_and(Vec::is_empty)
}

/// A list of scalars (`coveredResources`, `values`) is decided as a whole.
fn is_leaf(v: &Value) -> bool {
    v.as_array()
        .is_some_and(|a| a.is_empty() || a.iter().all(|x| !x.is_object() && !x.is_array()))
}

/// A scalar as YAML writes it (`true`, `0s`, `MayStopSearch`).
fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// `spec.resourceGroups[].flavors[].name`.
fn abstract_path(segs: &[Seg]) -> String {
    let mut out = String::new();
    for s in segs {
        match s {
            Seg::Key(k) if out.is_empty() => out.push_str(k),
            Seg::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Seg::Index(_) => out.push_str("[]"),
        }
    }
    out
}

/// `spec.resourceGroups[0].flavors[1].name`.
fn concrete_path(segs: &[Seg]) -> String {
    let mut out = String::new();
    for s in segs {
        match s {
            Seg::Key(k) if out.is_empty() => out.push_str(k),
            Seg::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// How many steps a row's path has (`a.b[].c`: 4).
fn segments(path: &str) -> usize {
    if path.is_empty() {
        return 0;
    }
    path.split('.').map(|part| 1 + part.matches("[]").count()).sum()
}

/// Sets `value` at `segs` in `out`, making the objects and lists on the
/// way (a list is padded with nulls, dropped by [`compact`]).
fn put(out: &mut Value, segs: &[Seg], value: Value) {
    let Some((first, rest)) = segs.split_first() else {
        *out = value;
        return;
    };
    let slot = match first {
        Seg::Key(k) => {
            if !out.is_object() {
                *out = Value::Object(Map::new());
            }
            let Value::Object(m) = out else { return };
            m.entry(k.clone()).or_insert(Value::Null)
        }
        Seg::Index(i) => {
            if !out.is_array() {
                *out = Value::Array(Vec::new());
            }
            let Value::Array(a) = out else { return };
            if a.len() <= *i {
                a.resize(*i + 1, Value::Null);
            }
            &mut a[*i]
        }
    };
    put(slot, rest, value);
}

/// Drops the nulls [`put`] padded lists with: list elements none of whose
/// keys were kept.
fn compact(v: &mut Value) {
    match v {
        Value::Object(m) => m.values_mut().for_each(compact),
        Value::Array(a) => {
            a.retain(|x| !x.is_null());
            a.iter_mut().for_each(compact);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rows_node_is_as_deep_as_its_path() {
        assert_eq!(segments(""), 0);
        assert_eq!(segments("spec.admissionChecks"), 2);
        assert_eq!(segments("spec.resourceGroups[].flavors[].name"), 6);
        let segs = [
            Seg::Key("spec".into()),
            Seg::Key("resourceGroups".into()),
            Seg::Index(0),
            Seg::Key("flavors".into()),
            Seg::Index(2),
            Seg::Key("name".into()),
        ];
        assert_eq!(concrete_path(&segs), "spec.resourceGroups[0].flavors[2].name");
        assert_eq!(abstract_path(&segs), "spec.resourceGroups[].flavors[].name");
    }

    #[test]
    fn kept_leaves_rebuild_the_object_and_lists_close_up() {
        let mut out = Value::Object(Map::new());
        let at = |i: usize, key: &str| vec![Seg::Key("a".into()), Seg::Index(i), Seg::Key(key.into())];
        put(&mut out, &at(0, "x"), Value::from(1));
        put(&mut out, &at(2, "x"), Value::from(3));
        compact(&mut out);
        assert_eq!(out, serde_json::json!({"a": [{"x": 1}, {"x": 3}]}));
    }
}
