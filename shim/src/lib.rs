//! libtprof.so (filled in by the shim work).
