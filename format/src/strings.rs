//! The string table: interned ids to text.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::record::StrId;

/// Interned strings of one file (id -> text). Keyed by id, not indexed by it: a file's ids need not
/// be dense (a damaged or hostile one may use any), and memory follows the strings it holds.
#[derive(Debug, Clone, Default)]
pub struct StringTable {
    by_id: BTreeMap<u32, Box<str>>,
}

impl StringTable {
    pub fn insert(&mut self, id: StrId, text: &str) {
        self.by_id.insert(id.0, text.into());
    }

    pub fn get(&self, id: StrId) -> Option<&str> {
        if id.0 == 0 {
            return Some("");
        }
        self.by_id.get(&id.0).map(|s| &**s)
    }

    /// The text, or `<str#N>` for an id with no definition.
    pub fn name(&self, id: StrId) -> Cow<'_, str> {
        match self.get(id) {
            Some(s) => Cow::Borrowed(s),
            None => Cow::Owned(format!("<str#{}>", id.0)),
        }
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Every string, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (StrId, &str)> {
        self.by_id.iter().map(|(&i, s)| (StrId(i), &**s))
    }
}
