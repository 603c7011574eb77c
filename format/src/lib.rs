//! The tprof ring-file format, shared by the shim (writer) and the decoder (reader).
//!
//! Layout of a ring file:
//! `[header page: 4 KiB][string dictionary region][ring: chunk_count x chunk_bytes]`.
//! See [`header`] for the header, [`record`] for the event vocabulary, [`codec`] for the compact
//! record encoding, [`writer`] for the crash-tolerant chunked ring writer and [`reader`] for the
//! damage-tolerant reader.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod record;

pub use record::*;
