//! Decode a tprof ring file into the model (waits for the format crate's reader).
