//! Floor 4, the services: the writer thread that drains the buffers into the ring and hosts the
//! periodic work ([`writer_thread`]), the Prometheus metrics file it writes ([`metrics`]), the control
//! socket ([`control_socket`], served by [`control_server`]) and the signal handlers ([`signals`]). `lifecycle` starts and stops them.

pub mod control_server;
pub mod control_socket;
pub mod metrics;
pub mod signals;
pub mod writer_thread;
