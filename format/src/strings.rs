//! The string table: interned ids to text.

use std::borrow::Cow;

use crate::record::StrId;

/// Interned strings of one file (id -> text).
#[derive(Debug, Clone, Default)]
pub struct StringTable {
    by_id: Vec<Option<Box<str>>>,
    count: usize,
}

impl StringTable {
    pub fn insert(&mut self, id: StrId, text: &str) {
        let i = id.0 as usize;
        if i >= self.by_id.len() {
            // Ids are dense (assigned 1, 2, 3 ...); cap growth so a corrupt id cannot exhaust memory.
            if i > self.by_id.len() + (1 << 20) {
                return;
            }
            self.by_id.resize(i + 1, None);
        }
        if self.by_id[i].is_none() {
            self.count += 1;
        }
        self.by_id[i] = Some(text.into());
    }

    pub fn get(&self, id: StrId) -> Option<&str> {
        if id.0 == 0 {
            return Some("");
        }
        self.by_id.get(id.0 as usize).and_then(|s| s.as_deref())
    }

    /// The text, or `<str#N>` for an id with no definition.
    pub fn name(&self, id: StrId) -> Cow<'_, str> {
        match self.get(id) {
            Some(s) => Cow::Borrowed(s),
            None => Cow::Owned(format!("<str#{}>", id.0)),
        }
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = (StrId, &str)> {
        self.by_id.iter().enumerate().filter_map(|(i, s)| s.as_deref().map(|s| (StrId(i as u32), s)))
    }
}
