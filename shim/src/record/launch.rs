//! A kernel launch as the launching thread stores it: the raw facts of the call in one buffer slot
//! ([`LaunchFacts`], plain stores), turned into the launch's `Api` record and its estimated `Kernel`
//! record by the writer thread ([`LaunchFacts::records`]). The records are exactly the ones the
//! launching thread would have built itself; only who builds them moves.

use tprof_format::{ApiDomain, Record, StrId};

/// What a recorded launch (CUPTI off, no stream capture) leaves in its thread's buffer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LaunchFacts {
    /// Ticks at the start and the end of the call.
    pub start: u64,
    pub end: u64,
    /// The stream handle as the program passed it (`_ptsz` entry points: NULL already mapped).
    pub stream: u64,
    /// `dim3` grid and block as passed.
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// The API called (interned), and the launched kernel's name ([`StrId::NONE`] if unknown).
    pub api: StrId,
    pub kernel: StrId,
    pub correlation: u32,
    /// The thread's current device (`cudaSetDevice`) at the call.
    pub device: u32,
    /// The call's result: 0 = launched (an estimated `Kernel` record follows the `Api` record).
    pub result: i32,
    /// Dynamic shared memory, bytes.
    pub smem: u32,
    pub domain: ApiDomain,
}

/// `x * y * z` of a `dim3`, a 0 counting as 1 (the launch's `Api` record's `arg` is grid * block).
#[inline(always)]
pub fn dim_count(d: [u32; 3]) -> u64 {
    u64::from(d[0].max(1)) * u64::from(d[1].max(1)) * u64::from(d[2].max(1))
}

impl LaunchFacts {
    /// Records the launch stands for, on thread `tid`: its `Api` record, then (launched: result 0)
    /// the estimated `Kernel` record (GPU time unknown: `start == end == 0`).
    #[inline(always)]
    pub fn records(&self, tid: u32) -> (Record, Option<Record>) {
        (self.api_record(tid), self.kernel_record())
    }

    /// The launch's `Api` record, on thread `tid`.
    #[inline(always)]
    pub fn api_record(&self, tid: u32) -> Record {
        Record::Api {
            tid,
            domain: self.domain,
            name: self.api,
            start: self.start,
            end: self.end,
            result: self.result,
            correlation: self.correlation,
            detail: self.kernel,
            stream: self.stream,
            arg: dim_count(self.grid) * dim_count(self.block),
        }
    }

    /// The launch's estimated `Kernel` record (GPU time unknown: `start == end == 0`), None when the
    /// launch failed (result not 0).
    #[inline(always)]
    pub fn kernel_record(&self) -> Option<Record> {
        if self.result != 0 {
            return None;
        }
        Some(Record::Kernel {
            device: self.device,
            context: 0,
            stream: self.stream as u32,
            start: 0,
            end: 0,
            grid: self.grid,
            block: self.block,
            registers: 0,
            shared_mem: self.smem,
            correlation: self.correlation,
            name: self.kernel,
            graph_id: 0,
        })
    }

    /// How many records [`LaunchFacts::records`] gives (for drop counts).
    #[inline(always)]
    pub fn record_count(&self) -> u64 {
        if self.result == 0 {
            2
        } else {
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(result: i32) -> LaunchFacts {
        LaunchFacts {
            start: 100,
            end: 250,
            stream: 0x1_0000_0007,
            grid: [4, 0, 2],
            block: [128, 1, 1],
            api: StrId(3),
            kernel: StrId(9),
            correlation: 0x8000_0101,
            device: 2,
            result,
            smem: 4096,
            domain: ApiDomain::Driver,
        }
    }

    #[test]
    fn a_launch_gives_its_api_and_estimated_kernel_records() {
        let (api, kernel) = facts(0).records(77);
        assert_eq!(
            api,
            Record::Api {
                tid: 77,
                domain: ApiDomain::Driver,
                name: StrId(3),
                start: 100,
                end: 250,
                result: 0,
                correlation: 0x8000_0101,
                detail: StrId(9),
                stream: 0x1_0000_0007,
                // grid 4 x 1 (0 counts as 1) x 2, block 128
                arg: 8 * 128,
            }
        );
        assert_eq!(
            kernel,
            Some(Record::Kernel {
                device: 2,
                context: 0,
                // the stream id as the Kernel record holds it: the handle's low 32 bits
                stream: 7,
                start: 0,
                end: 0,
                grid: [4, 0, 2],
                block: [128, 1, 1],
                registers: 0,
                shared_mem: 4096,
                correlation: 0x8000_0101,
                name: StrId(9),
                graph_id: 0,
            })
        );
        assert_eq!(facts(0).record_count(), 2);
    }

    #[test]
    fn a_failed_launch_gives_its_api_record_only() {
        let (api, kernel) = facts(700).records(5);
        assert!(matches!(api, Record::Api { result: 700, tid: 5, .. }));
        assert_eq!(kernel, None);
        assert_eq!(facts(700).record_count(), 1);
    }
}
