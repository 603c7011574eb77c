//! Minimal run-time NVML binding: `dlopen("libnvidia-ml.so.1")` and the 14 functions the sampler
//! reads, and 5 optional topology queries. Declarations follow the public `nvml.h`; GPM structs as in CUDA_FACTS.md section 7.

use std::ffi::{c_int, c_uint, c_void, CStr};
use std::ptr::null_mut;

/// `nvmlReturn_t`.
pub type NvmlReturn = c_int;
/// `nvmlDevice_t` (a handle from `nvmlDeviceGetHandleByIndex_v2`).
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct Device(*mut c_void);
/// `nvmlGpmSample_t` (from `nvmlGpmSampleAlloc`).
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct GpmSample(*mut c_void);

pub const NVML_SUCCESS: NvmlReturn = 0;
const NVML_CLOCK_SM: c_uint = 1;
const NVML_TEMPERATURE_GPU: c_uint = 0;
const NVML_GPM_SUPPORT_VERSION: c_uint = 1;
const NVML_GPM_METRICS_GET_VERSION: c_uint = 1;

/// Metrics we ask for per call; our array's size (never the header's `NVML_GPM_METRIC_MAX`).
pub const GPM_SLOTS: usize = 16;

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Utilization {
    pub gpu: c_uint,
    pub memory: c_uint,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Memory {
    pub total: u64,
    pub free: u64,
    pub used: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct GpmSupport {
    version: c_uint,
    is_supported_device: c_uint,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct GpmMetricInfo {
    short_name: *mut c_void,
    long_name: *mut c_void,
    unit: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct GpmMetric {
    metric_id: c_uint,
    nvml_return: NvmlReturn,
    value: f64,
    info: GpmMetricInfo,
}

/// `nvmlGpmMetricsGet_t` with our own (smaller) metrics array: `numMetrics` stays within it.
#[repr(C)]
struct GpmMetricsGet {
    version: c_uint,
    num_metrics: c_uint,
    sample1: GpmSample,
    sample2: GpmSample,
    metrics: [GpmMetric; GPM_SLOTS],
}

type FnInit = unsafe extern "C" fn() -> NvmlReturn;
type FnCount = unsafe extern "C" fn(*mut c_uint) -> NvmlReturn;
type FnHandle = unsafe extern "C" fn(c_uint, *mut Device) -> NvmlReturn;
type FnUtil = unsafe extern "C" fn(Device, *mut Utilization) -> NvmlReturn;
type FnMem = unsafe extern "C" fn(Device, *mut Memory) -> NvmlReturn;
type FnClock = unsafe extern "C" fn(Device, c_uint, *mut c_uint) -> NvmlReturn;
type FnPower = unsafe extern "C" fn(Device, *mut c_uint) -> NvmlReturn;
type FnTemp = unsafe extern "C" fn(Device, c_uint, *mut c_uint) -> NvmlReturn;
type FnGpmSupport = unsafe extern "C" fn(Device, *mut GpmSupport) -> NvmlReturn;
type FnGpmAlloc = unsafe extern "C" fn(*mut GpmSample) -> NvmlReturn;
type FnGpmFree = unsafe extern "C" fn(GpmSample) -> NvmlReturn;
type FnGpmGet = unsafe extern "C" fn(Device, GpmSample) -> NvmlReturn;
type FnGpmMetrics = unsafe extern "C" fn(*mut GpmMetricsGet) -> NvmlReturn;

type FnPciInfo = unsafe extern "C" fn(Device, *mut PciInfo) -> NvmlReturn;
type FnNvLinkState = unsafe extern "C" fn(Device, c_uint, *mut c_int) -> NvmlReturn;
type FnNvLinkVersion = unsafe extern "C" fn(Device, c_uint, *mut c_uint) -> NvmlReturn;
type FnCommonAncestor = unsafe extern "C" fn(Device, Device, *mut c_uint) -> NvmlReturn;
type FnP2PStatus = unsafe extern "C" fn(Device, Device, c_uint, *mut c_uint) -> NvmlReturn;

/// `nvmlPciInfo_t` (nvml.h, `nvmlDeviceGetPciInfo_v3`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PciInfo {
    pub bus_id_legacy: [u8; 16],
    pub domain: c_uint,
    pub bus: c_uint,
    pub device: c_uint,
    pub pci_device_id: c_uint,
    pub pci_sub_system_id: c_uint,
    pub bus_id: [u8; 32],
}

/// `NVML_NVLINK_MAX_LINKS`.
pub const NVLINK_MAX_LINKS: u32 = 18;
/// `NVML_P2P_CAPS_INDEX_NVLINK`, `NVML_P2P_STATUS_OK`.
const P2P_CAPS_INDEX_NVLINK: c_uint = 2;
const P2P_STATUS_OK: c_uint = 0;

/// Optional topology entry points (each may be absent).
struct TopoFns {
    pci: Option<FnPciInfo>,
    link_state: Option<FnNvLinkState>,
    link_version: Option<FnNvLinkVersion>,
    ancestor: Option<FnCommonAncestor>,
    p2p: Option<FnP2PStatus>,
}

/// Optional GPM entry points (absent in NVML before 11.8).
struct GpmFns {
    support: FnGpmSupport,
    alloc: FnGpmAlloc,
    free: FnGpmFree,
    get: FnGpmGet,
    metrics: FnGpmMetrics,
}

/// The loaded library; `nvmlInit_v2` has succeeded.
pub struct Nvml {
    count: FnCount,
    handle: FnHandle,
    util: FnUtil,
    mem: FnMem,
    clock: FnClock,
    power: FnPower,
    temp: FnTemp,
    gpm: Option<GpmFns>,
    topo: TopoFns,
}

// SAFETY: the struct holds only function pointers into a library that stays loaded (never
// dlclosed); NVML is documented as thread-safe.
unsafe impl Send for Nvml {}

/// Why NVML is unusable.
#[derive(Debug)]
pub enum LoadError {
    /// The library is not there (no NVIDIA driver): said in one line, nothing else changes.
    Absent(String),
    /// Present but unusable (missing symbol, init failed).
    Failed(String),
}

fn sym(h: *mut c_void, name: &CStr) -> Option<*mut c_void> {
    // SAFETY: `h` is a live handle from dlopen (never closed); the name is NUL-terminated.
    let p = unsafe { crate::base::dynamic_loader::symbol_in(h, name) };
    (!p.is_null()).then_some(p)
}

macro_rules! need {
    ($h:expr, $name:literal, $ty:ty) => {
        match sym($h, $name) {
            // SAFETY: the symbol is NVML's function of that name; `$ty` is its C signature from nvml.h.
            Some(p) => unsafe { std::mem::transmute::<*mut c_void, $ty>(p) },
            None => return Err(LoadError::Failed(format!("{} lacks {}", LIB, $name.to_string_lossy()))),
        }
    };
}

macro_rules! want {
    ($h:expr, $name:literal, $ty:ty) => {
        match sym($h, $name) {
            // SAFETY: the symbol is NVML's function of that name; `$ty` is its C signature from nvml.h.
            Some(p) => Some(unsafe { std::mem::transmute::<*mut c_void, $ty>(p) }),
            None => None,
        }
    };
}

/// The library name NVIDIA's driver installs.
pub const LIB: &str = "libnvidia-ml.so.1";

impl Nvml {
    /// Loads `libnvidia-ml.so.1` (the normal library search) and initialises it.
    pub fn load() -> Result<Nvml, LoadError> {
        // SAFETY: dlopen with a NUL-terminated name; the handle is kept for the life of the process.
        let h = unsafe { libc::dlopen(c"libnvidia-ml.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if h.is_null() {
            return Err(LoadError::Absent(format!("{LIB} not found")));
        }
        let init = need!(h, c"nvmlInit_v2", FnInit);
        let n = Nvml {
            count: need!(h, c"nvmlDeviceGetCount_v2", FnCount),
            handle: need!(h, c"nvmlDeviceGetHandleByIndex_v2", FnHandle),
            util: need!(h, c"nvmlDeviceGetUtilizationRates", FnUtil),
            mem: need!(h, c"nvmlDeviceGetMemoryInfo", FnMem),
            clock: need!(h, c"nvmlDeviceGetClockInfo", FnClock),
            power: need!(h, c"nvmlDeviceGetPowerUsage", FnPower),
            temp: need!(h, c"nvmlDeviceGetTemperature", FnTemp),
            gpm: (|| {
                Some(GpmFns {
                    support: want!(h, c"nvmlGpmQueryDeviceSupport", FnGpmSupport)?,
                    alloc: want!(h, c"nvmlGpmSampleAlloc", FnGpmAlloc)?,
                    free: want!(h, c"nvmlGpmSampleFree", FnGpmFree)?,
                    get: want!(h, c"nvmlGpmSampleGet", FnGpmGet)?,
                    metrics: want!(h, c"nvmlGpmMetricsGet", FnGpmMetrics)?,
                })
            })(),
            topo: TopoFns {
                pci: want!(h, c"nvmlDeviceGetPciInfo_v3", FnPciInfo),
                link_state: want!(h, c"nvmlDeviceGetNvLinkState", FnNvLinkState),
                link_version: want!(h, c"nvmlDeviceGetNvLinkVersion", FnNvLinkVersion),
                ancestor: want!(h, c"nvmlDeviceGetTopologyCommonAncestor", FnCommonAncestor),
                p2p: want!(h, c"nvmlDeviceGetP2PStatus", FnP2PStatus),
            },
        };
        // SAFETY: nvmlInit_v2 takes no arguments; it may be called from any thread.
        let rc = unsafe { init() };
        if rc != NVML_SUCCESS {
            return Err(LoadError::Failed(format!("nvmlInit_v2 returned {rc}")));
        }
        Ok(n)
    }

    pub fn device_count(&self) -> u32 {
        let mut c: c_uint = 0;
        // SAFETY: writes one unsigned int into `c`.
        let rc = unsafe { (self.count)(&mut c) };
        if rc == NVML_SUCCESS {
            c
        } else {
            0
        }
    }

    pub fn device(&self, index: u32) -> Option<Device> {
        let mut d = Device(null_mut());
        // SAFETY: writes one device handle into `d`.
        let rc = unsafe { (self.handle)(index, &mut d) };
        (rc == NVML_SUCCESS && !d.0.is_null()).then_some(d)
    }

    /// The PCI bus id ("00000000:3B:00.0"), when NVML offers it.
    pub fn pci_bus_id(&self, d: Device) -> Option<String> {
        let f = self.topo.pci?;
        // SAFETY: all-zero bytes are a valid nvmlPciInfo_t (integers and byte arrays).
        let mut p: PciInfo = unsafe { std::mem::zeroed() };
        // SAFETY: `d` is a valid handle; writes one nvmlPciInfo_t.
        let rc = unsafe { f(d, &mut p) };
        if rc != NVML_SUCCESS {
            return None;
        }
        let end = p.bus_id.iter().position(|&b| b == 0).unwrap_or(p.bus_id.len());
        Some(String::from_utf8_lossy(&p.bus_id[..end]).into_owned())
    }

    /// Active NVLinks of `d` and the `nvmlNvlinkVersion_t` of the first active one.
    pub fn nvlinks(&self, d: Device) -> (u32, u32) {
        let Some(state) = self.topo.link_state else { return (0, 0) };
        let (mut active, mut version) = (0, 0);
        for link in 0..NVLINK_MAX_LINKS {
            let mut on: c_int = 0;
            // SAFETY: `d` is a valid handle; writes one nvmlEnableState_t (an int).
            if unsafe { state(d, link, &mut on) } != NVML_SUCCESS || on != 1 {
                continue;
            }
            active += 1;
            if version == 0 {
                if let Some(f) = self.topo.link_version {
                    let mut v: c_uint = 0;
                    // SAFETY: as above; writes one unsigned int.
                    if unsafe { f(d, link, &mut v) } == NVML_SUCCESS {
                        version = v;
                    }
                }
            }
        }
        (active, version)
    }

    /// `nvmlGpuTopologyLevel_t` between two devices, and whether NVLink P2P works between them.
    pub fn path(&self, a: Device, b: Device) -> (Option<u32>, Option<bool>) {
        let level = self.topo.ancestor.and_then(|f| {
            let mut l: c_uint = 0;
            // SAFETY: both are valid handles; writes one nvmlGpuTopologyLevel_t.
            (unsafe { f(a, b, &mut l) } == NVML_SUCCESS).then_some(l)
        });
        let nvlink = self.topo.p2p.and_then(|f| {
            let mut st: c_uint = 0;
            // SAFETY: both are valid handles; writes one nvmlGpuP2PStatus_t.
            (unsafe { f(a, b, P2P_CAPS_INDEX_NVLINK, &mut st) } == NVML_SUCCESS).then_some(st == P2P_STATUS_OK)
        });
        (level, nvlink)
    }

    pub fn utilization(&self, d: Device) -> Option<Utilization> {
        let mut u = Utilization::default();
        // SAFETY: `d` came from nvmlDeviceGetHandleByIndex_v2; writes one nvmlUtilization_t.
        (unsafe { (self.util)(d, &mut u) } == NVML_SUCCESS).then_some(u)
    }

    pub fn memory(&self, d: Device) -> Option<Memory> {
        let mut m = Memory::default();
        // SAFETY: `d` is a valid handle; writes one nvmlMemory_t (v1 layout).
        (unsafe { (self.mem)(d, &mut m) } == NVML_SUCCESS).then_some(m)
    }

    pub fn sm_clock_mhz(&self, d: Device) -> Option<u32> {
        let mut v: c_uint = 0;
        // SAFETY: `d` is a valid handle; writes one unsigned int.
        (unsafe { (self.clock)(d, NVML_CLOCK_SM, &mut v) } == NVML_SUCCESS).then_some(v)
    }

    pub fn power_mw(&self, d: Device) -> Option<u32> {
        let mut v: c_uint = 0;
        // SAFETY: `d` is a valid handle; writes one unsigned int.
        (unsafe { (self.power)(d, &mut v) } == NVML_SUCCESS).then_some(v)
    }

    pub fn temperature_c(&self, d: Device) -> Option<u32> {
        let mut v: c_uint = 0;
        // SAFETY: `d` is a valid handle; writes one unsigned int.
        (unsafe { (self.temp)(d, NVML_TEMPERATURE_GPU, &mut v) } == NVML_SUCCESS).then_some(v)
    }

    /// True when GPM is available for this device (library entry points and device support).
    pub fn gpm_supported(&self, d: Device) -> bool {
        let Some(g) = &self.gpm else { return false };
        let mut s = GpmSupport { version: NVML_GPM_SUPPORT_VERSION, is_supported_device: 0 };
        // SAFETY: `d` is a valid handle; writes one nvmlGpmSupport_t whose version we set.
        let rc = unsafe { (g.support)(d, &mut s) };
        rc == NVML_SUCCESS && s.is_supported_device != 0
    }

    pub fn gpm_alloc(&self) -> Option<GpmSample> {
        let g = self.gpm.as_ref()?;
        let mut s = GpmSample(null_mut());
        // SAFETY: writes one sample handle.
        (unsafe { (g.alloc)(&mut s) } == NVML_SUCCESS && !s.0.is_null()).then_some(s)
    }

    pub fn gpm_free(&self, s: GpmSample) {
        if let Some(g) = &self.gpm {
            // SAFETY: `s` came from nvmlGpmSampleAlloc and is freed once.
            unsafe { (g.free)(s) };
        }
    }

    pub fn gpm_sample(&self, d: Device, s: GpmSample) -> bool {
        let Some(g) = &self.gpm else { return false };
        // SAFETY: `d` is a valid handle, `s` a live sample from nvmlGpmSampleAlloc.
        unsafe { (g.get)(d, s) == NVML_SUCCESS }
    }

    /// Computes `ids` over the interval between two samples of one device; `None` per metric when
    /// NVML says it failed. `ids.len()` is at most [`GPM_SLOTS`].
    pub fn gpm_metrics(&self, s1: GpmSample, s2: GpmSample, ids: &[u32]) -> Option<Vec<Option<f64>>> {
        let g = self.gpm.as_ref()?;
        let n = ids.len().min(GPM_SLOTS);
        let blank = GpmMetric {
            metric_id: 0,
            nvml_return: NVML_SUCCESS,
            value: 0.0,
            info: GpmMetricInfo { short_name: null_mut(), long_name: null_mut(), unit: null_mut() },
        };
        let mut m = GpmMetricsGet {
            version: NVML_GPM_METRICS_GET_VERSION,
            num_metrics: n as c_uint,
            sample1: s1,
            sample2: s2,
            metrics: [blank; GPM_SLOTS],
        };
        for (slot, id) in m.metrics.iter_mut().zip(&ids[..n]) {
            slot.metric_id = *id;
        }
        // SAFETY: `m` is a valid nvmlGpmMetricsGet_t prefix whose numMetrics fits our array, and both
        // samples are live and taken on the same device.
        let rc = unsafe { (g.metrics)(&mut m) };
        if rc != NVML_SUCCESS {
            return None;
        }
        Some(
            m.metrics[..n]
                .iter()
                .map(|x| (x.nvml_return == NVML_SUCCESS && x.value.is_finite()).then_some(x.value))
                .collect(),
        )
    }
}
