//! Format crate.
