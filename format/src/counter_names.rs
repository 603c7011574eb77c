//! Names of the GPU counters the shim samples (`Record::Counter.name`, from NVML: basic metrics on
//! every device, GPM metrics where the device has them) and the decoder reads. Stable: reports,
//! exports and dashboards refer to them.

pub const UTIL: &str = "gpu.util_pct";
pub const MEM_UTIL: &str = "gpu.mem_util_pct";
pub const MEM_USED: &str = "gpu.mem_used_bytes";
pub const SM_CLOCK: &str = "gpu.sm_clock_mhz";
pub const POWER: &str = "gpu.power_w";
pub const TEMP: &str = "gpu.temp_c";
pub const SM_ACTIVE: &str = "gpu.sm_active_pct";
pub const SM_OCCUPANCY: &str = "gpu.sm_occupancy_pct";
pub const TENSOR_ACTIVE: &str = "gpu.tensor_active_pct";
pub const DRAM_BW: &str = "gpu.dram_bw_pct";
pub const PCIE_TX: &str = "gpu.pcie_tx_MBps";
pub const PCIE_RX: &str = "gpu.pcie_rx_MBps";
pub const NVLINK_RX: &str = "gpu.nvlink_rx_MBps";
pub const NVLINK_TX: &str = "gpu.nvlink_tx_MBps";
