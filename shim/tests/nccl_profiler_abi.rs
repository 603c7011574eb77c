//! The NCCL profiler plugin structs libtprof exports and reads (`intercept::nccl_profiler::abi`)
//! have the C layout of NCCL's profiler_v1..v6.h: every struct's size and every field's offset is
//! compared with what a C compiler gives for tests/simgpu/src/nccl_profiler_abi.h (written from
//! those headers; the nvidia-nccl wheels do not ship them), through a generated C program.

use std::mem::{offset_of, size_of};
use std::path::Path;
use std::process::Command;

use tprof::intercept::nccl_profiler::abi::*;

struct Check {
    c: String,
    rust: usize,
}

fn check(c: String, rust: usize) -> Check {
    Check { c, rust }
}

/// Size and the header fields of a descriptor (the union's offset through member `first`).
macro_rules! descr {
    ($v:ident, $rs:ty, $c:literal, $first:literal) => {
        $v.push(check(format!("sizeof({})", $c), size_of::<$rs>()));
        $v.push(check(format!("offsetof({}, type)", $c), offset_of!($rs, type_)));
        $v.push(check(format!("offsetof({}, parentObj)", $c), offset_of!($rs, parentObj)));
        $v.push(check(format!("offsetof({}, rank)", $c), offset_of!($rs, rank)));
        $v.push(check(format!("offsetof({}, {})", $c, $first), offset_of!($rs, u)));
    };
}

/// One union member: its size and every field's offset from the descriptor's start.
macro_rules! member {
    ($v:ident, $outer:ty, $c:literal, $m:literal, $inner:ty, [$($f:ident),* $(,)?]) => {
        $v.push(check(format!("sizeof((({} *)0)->{})", $c, $m), size_of::<$inner>()));
        $( $v.push(check(
            format!("offsetof({}, {}.{})", $c, $m, stringify!($f)),
            offset_of!($outer, u) + offset_of!($inner, $f),
        )); )*
    };
}

/// A union of state arguments: size and each member's fields (all at offset 0 of the union).
macro_rules! args {
    ($v:ident, $rs:ty, $c:literal, [$($m:ident . $f:ident : $inner:ty),* $(,)?]) => {
        $v.push(check(format!("sizeof({})", $c), size_of::<$rs>()));
        $( $v.push(check(format!("offsetof({}, {}.{})", $c, stringify!($m), stringify!($f)), offset_of!($inner, $f))); )*
    };
}

macro_rules! table {
    ($v:ident, $rs:ty, $c:literal) => {
        $v.push(check(format!("sizeof({})", $c), size_of::<$rs>()));
        $v.push(check(format!("offsetof({}, name)", $c), offset_of!($rs, name)));
        $v.push(check(format!("offsetof({}, init)", $c), offset_of!($rs, init)));
        $v.push(check(format!("offsetof({}, startEvent)", $c), offset_of!($rs, startEvent)));
        $v.push(check(format!("offsetof({}, stopEvent)", $c), offset_of!($rs, stopEvent)));
        $v.push(check(format!("offsetof({}, recordEventState)", $c), offset_of!($rs, recordEventState)));
        $v.push(check(format!("offsetof({}, finalize)", $c), offset_of!($rs, finalize)));
    };
}

macro_rules! common_members {
    ($v:ident, $rs:ty, $c:literal) => {
        member!($v, $rs, $c, "proxyOp", ProxyOp, [pid, channelId, peer, nSteps, chunkSize, isSend]);
        member!($v, $rs, $c, "proxyStep", ProxyStep, [step]);
    };
}

fn checks() -> Vec<Check> {
    let mut v = Vec::new();
    descr!(v, DescrV1, "sgp_descr_v1", "coll");
    member!(
        v,
        DescrV1,
        "sgp_descr_v1",
        "coll",
        CollV1,
        [
            name,
            commHash,
            seqNumber,
            func,
            sendBuff,
            recvBuff,
            count,
            root,
            datatype,
            op,
            trafficBytes,
            nMaxChannels,
            nWarps,
            algo,
            proto,
            isCollnet,
            isNvls,
        ]
    );
    member!(v, DescrV1, "sgp_descr_v1", "p2p", P2pV1, [name, commHash, func, buff, datatype, count, peer]);
    common_members!(v, DescrV1, "sgp_descr_v1");
    descr!(v, DescrV2, "sgp_descr_v2", "coll");
    member!(
        v,
        DescrV2,
        "sgp_descr_v2",
        "coll",
        CollV2,
        [
            name,
            commHash,
            seqNumber,
            func,
            sendBuff,
            recvBuff,
            count,
            root,
            datatype,
            trafficBytes,
            nMaxChannels,
            nWarps,
            algo,
            proto,
        ]
    );
    member!(v, DescrV2, "sgp_descr_v2", "p2p", P2pV2, [name, commHash, func, buff, datatype, count, peer]);
    common_members!(v, DescrV2, "sgp_descr_v2");
    descr!(v, DescrV3, "sgp_descr_v3", "coll");
    member!(
        v,
        DescrV3,
        "sgp_descr_v3",
        "coll",
        CollV3,
        [name, commHash, seqNumber, func, sendBuff, recvBuff, count, root, datatype, nMaxChannels, nWarps, algo, proto,]
    );
    member!(v, DescrV3, "sgp_descr_v3", "p2p", P2pV2, [name, commHash, func, buff, datatype, count, peer]);
    member!(v, DescrV3, "sgp_descr_v3", "kernelCh", KernelChV3, [channelId]);
    member!(v, DescrV3, "sgp_descr_v3", "netPlugin", NetPlugin, [id, data]);
    common_members!(v, DescrV3, "sgp_descr_v3");
    descr!(v, DescrV4, "sgp_descr_v4", "coll");
    member!(
        v,
        DescrV4,
        "sgp_descr_v4",
        "coll",
        CollV4,
        [seqNumber, func, sendBuff, recvBuff, count, root, datatype, nChannels, nWarps, algo, proto,]
    );
    member!(v, DescrV4, "sgp_descr_v4", "p2p", P2pV4, [func, buff, datatype, count, peer, nChannels]);
    member!(v, DescrV4, "sgp_descr_v4", "kernelCh", KernelChV4, [channelId, pTimer]);
    member!(v, DescrV4, "sgp_descr_v4", "netPlugin", NetPlugin, [id, data]);
    common_members!(v, DescrV4, "sgp_descr_v4");
    macro_rules! v5_members {
        ($rs:ty, $c:literal) => {
            descr!(v, $rs, $c, "groupApi");
            member!(v, $rs, $c, "groupApi", GroupApiV5, [graphCaptured, groupDepth]);
            member!(v, $rs, $c, "collApi", CollApiV5, [func, count, datatype, root, stream, graphCaptured]);
            member!(v, $rs, $c, "p2pApi", P2pApiV5, [func, count, datatype, stream, graphCaptured]);
            member!(v, $rs, $c, "kernelLaunch", KernelLaunchV5, [stream]);
            member!(
                v,
                $rs,
                $c,
                "coll",
                CollV5,
                [
                    seqNumber,
                    func,
                    sendBuff,
                    recvBuff,
                    count,
                    root,
                    datatype,
                    nChannels,
                    nWarps,
                    algo,
                    proto,
                    parentGroup,
                ]
            );
            member!(v, $rs, $c, "p2p", P2pV5, [func, buff, datatype, count, peer, nChannels, parentGroup]);
            member!(v, $rs, $c, "kernelCh", KernelChV4, [channelId, pTimer]);
            member!(v, $rs, $c, "netPlugin", NetPlugin, [id, data]);
            common_members!(v, $rs, $c);
        };
    }
    v5_members!(DescrV5, "sgp_descr_v5");
    v5_members!(DescrV6, "sgp_descr_v6");
    member!(
        v,
        DescrV6,
        "sgp_descr_v6",
        "ceColl",
        CeCollV6,
        [
            seqNumber,
            func,
            sendBuff,
            recvBuff,
            count,
            root,
            datatype,
            syncStrategy,
            intraBatchSync,
            batchSize,
            numBatches,
            ceSeqNum,
            stream,
        ]
    );
    member!(v, DescrV6, "sgp_descr_v6", "ceCollSync", CeCollSyncV6, [isComplete, nRanks]);
    member!(v, DescrV6, "sgp_descr_v6", "ceCollBatch", CeCollBatchV6, [numOps, totalBytes, useIntraSync]);
    args!(v, StateArgsV1, "sgp_args_v1", [proxyOp.transSize: ProxyOpArgsV1, proxyOp.steps: ProxyOpArgsV1,
        proxyCtrl.appendedProxyOps: ProxyCtrlArgs]);
    args!(v, StateArgsV4, "sgp_args_v4", [proxyStep.transSize: ProxyStepArgs, proxyCtrl.appendedProxyOps: ProxyCtrlArgs,
        netPlugin.data: NetPluginArgs, kernelCh.pTimer: KernelChArgs]);
    table!(v, ProfilerV1, "sgp_profiler_v1");
    table!(v, ProfilerV2, "sgp_profiler_v2");
    table!(v, ProfilerV3, "sgp_profiler_v3");
    table!(v, ProfilerV4, "sgp_profiler_v4");
    table!(v, ProfilerV5, "sgp_profiler_v5");
    table!(v, ProfilerV6, "sgp_profiler_v6");
    v
}

#[test]
fn plugin_structs_match_the_c_layout_of_every_version() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let header = root.join("tests/simgpu/src/nccl_profiler_abi.h");
    let checks = checks();
    let work = tempfile::tempdir().unwrap();
    let mut prog = format!("#include <stdio.h>\n#include \"{}\"\nint main(void)\n{{\n", header.display());
    for c in &checks {
        prog += &format!("    printf(\"%zu\\n\", (size_t)({}));\n", c.c);
    }
    prog += "    return 0;\n}\n";
    let src = work.path().join("layout.c");
    let exe = work.path().join("layout");
    std::fs::write(&src, prog).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc).arg("-std=gnu11").arg("-Werror").arg(&src).arg("-o").arg(&exe).output().unwrap();
    assert!(out.status.success(), "{cc} failed: {}", String::from_utf8_lossy(&out.stderr));
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success());
    let values: Vec<usize> = String::from_utf8(run.stdout).unwrap().lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(values.len(), checks.len());
    let wrong: Vec<String> = checks
        .iter()
        .zip(&values)
        .filter(|(c, &v)| c.rust != v)
        .map(|(c, v)| format!("{}: C {v}, Rust {}", c.c, c.rust))
        .collect();
    assert!(wrong.is_empty(), "{} of {} layout values differ:\n{}", wrong.len(), checks.len(), wrong.join("\n"));
    assert!(checks.len() > 250, "{} values checked", checks.len());
}
