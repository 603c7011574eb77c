//! Floor 1, what every other room stands on. Nothing here imports a room above: the one-line
//! messages, hook tables (how a room calls up without importing), the on/off switch, the panic
//! fence, the dynamic loader, the clock, the configuration, who this process is, and whether the
//! CUDA driver works.

pub mod config;
pub mod driver;
pub mod dynamic_loader;
pub mod hook_table;
pub mod messages;
pub mod panic_fence;
pub mod process;
pub mod switch;
pub mod ticks;
