//! Minimal CUPTI FFI (filled in by the shim work).
