//! The tprof ring-file format, shared by the shim (writer) and the decoder (reader).
//!
//! Layout of a ring file:
//! `[header page: 4 KiB][string dictionary region][ring: chunk_count x chunk_bytes]`.
//! [`header`] holds the process identity and live counters, [`record`] the event vocabulary,
//! [`codec`] the compact framed encoding, [`chunk`] the chunk framing, [`writer`] the crash-tolerant
//! ring writer and [`reader`] the damage-tolerant reader; [`clock`] converts ticks to nanoseconds.
//!
//! Beyond the file, the contracts both sides speak live here too, so neither keeps a copy:
//! [`settings`] (the `TPROF_*` variables, capture modes, step ranges, duty cycles, durations),
//! [`control_protocol`] (`tprof ctl` and the process's control socket), [`counter_names`] (the GPU
//! counters) and [`bus_bandwidth`] (the nccl-tests bus factor).
#![deny(unsafe_op_in_unsafe_fn)]

pub mod bus_bandwidth;
pub mod chunk;
pub mod clock;
pub mod codec;
pub mod control_protocol;
pub mod counter_names;
pub mod error;
pub mod header;
mod header_recovery;
mod pages;
pub mod reader;
pub mod record;
pub mod settings;
pub mod strings;
pub mod topology;
pub mod varint;
pub mod writer;

pub use clock::{MonoCursor, TickConverter};
pub use codec::{Decoded, DecodedVisitor};
pub use error::{FileError, FormatError};
pub use header::{ring_file_name, ClockSource, FileHeader, LiveStats, FORMAT_VERSION};
pub use reader::{ChunkRef, Damage, RingReader};
pub use record::*;
pub use strings::StringTable;
pub use writer::{create_private_file, RecordSink, RingGeometry, RingWriter};
