/* nic_counters.h - the simulated node's NIC counters in a fake sysfs (nic_counters.c). */
#ifndef SIMGPU_NIC_COUNTERS_H
#define SIMGPU_NIC_COUNTERS_H

#include <stdint.h>

/* Opens the node's totals and, on the node's first rank, starts the counters' writer (once). */
void sgn_nic_start(void);
/* A transfer of this rank across nodes through its node's NIC, from start to end (CLOCK_MONOTONIC
 * ns): the bytes it sends and receives. */
void sgn_nic_transfer(uint64_t start_ns, uint64_t end_ns, uint64_t tx, uint64_t rx);
/* GB/s of other traffic on node `node`'s NIC, each way (SIMGPU_NIC_OTHER_GBPS_NODE<k>). */
double sgn_nic_other_gbps(int node);

#endif
