//! CUDA's types as the wrappers see them: opaque handles, `dim3`, and the per-thread default stream
//! of the `_ptsz` / `_ptds` entry points.

use std::ffi::c_void;

/// `cudaStream_t` / `CUstream` / events / graphs: opaque handles.
pub type Handle = *mut c_void;

/// CUDA's `dim3` / `uint3`, passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dim3 {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}

impl Dim3 {
    pub fn arr(self) -> [u32; 3] {
        [self.x, self.y, self.z]
    }
    pub(crate) fn count(self) -> u64 {
        crate::record::launch::dim_count(self.arr())
    }
}

/// The stream a runtime `_ptsz` entry point works on: NULL there is the per-thread default stream.
#[inline]
pub(crate) fn per_thread(stream: Handle) -> Handle {
    const STREAM_PER_THREAD: usize = 0x2;
    if stream.is_null() {
        STREAM_PER_THREAD as Handle
    } else {
        stream
    }
}
