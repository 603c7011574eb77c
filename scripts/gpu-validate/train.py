#!/usr/bin/env python3
"""A small PyTorch training job for the tprof GPU validation kit (scripts/gpu-validate.sh).

A few-layer transformer on synthetic tokens, bf16 autocast, a fixed number of steps. Each step is
an NVTX range "step" (torch.cuda.nvtx.range_push) and a record_function("step") (so Kineto sees
the same step boundaries), and holds one NCCL all_reduce of the flattened gradients on a
single-rank process group (init over a file:// store: no network needed).

Modes (the program is the same in each; only what watches it differs):
  bare    nothing attached
  tprof   the caller sets LD_PRELOAD=libtprof.so (or CUDA_INJECTION64_PATH); nothing changes here
  kineto  the whole run is inside torch.profiler.profile(CPU+CUDA); the trace is exported as
          Chrome JSON to --trace

Throughput: steps/s over the steps after --warmup (the GPU is synchronised at every step end),
written as JSON to --result and printed as one line 'GPU_VALIDATE_RESULT {...}'.
"""

import argparse
import json
import os
import sys
import tempfile
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["bare", "tprof", "kineto"], required=True)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--result", required=True, help="JSON file for the throughput result")
    p.add_argument("--trace", help="Kineto Chrome-trace output file (mode kineto)")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--seed", type=int, default=1234)
    a = p.parse_args(argv)
    if a.mode == "kineto" and not a.trace:
        p.error("--mode kineto needs --trace")
    if a.steps <= a.warmup:
        p.error("--steps must be larger than --warmup")
    return a


def main(argv=None):
    a = parse_args(argv)
    import torch
    import torch.distributed as dist
    import torch.nn as nn

    if not torch.cuda.is_available():
        print("train.py: torch.cuda.is_available() is False", file=sys.stderr)
        return 3

    prof = None
    if a.mode == "kineto":
        from torch.profiler import ProfilerActivity, profile

        # Started before any CUDA work, so it sees what tprof sees (the whole process).
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=False)
        prof.start()

    torch.manual_seed(a.seed)
    torch.cuda.set_device(0)
    dev = torch.device("cuda", 0)
    os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    store_dir = tempfile.mkdtemp(prefix="gpu-validate-pg-")
    dist.init_process_group("nccl", rank=0, world_size=1, init_method="file://" + os.path.join(store_dir, "store"))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(a.vocab, a.d_model)
            layer = nn.TransformerEncoderLayer(
                a.d_model, a.heads, dim_feedforward=4 * a.d_model, batch_first=True, norm_first=True, dropout=0.0
            )
            self.enc = nn.TransformerEncoder(layer, a.layers, enable_nested_tensor=False)
            self.head = nn.Linear(a.d_model, a.vocab)

        def forward(self, x):
            return self.head(self.enc(self.emb(x)))

    model = Model().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    params = [p for p in model.parameters() if p.requires_grad]
    g = torch.Generator(device=dev)
    g.manual_seed(a.seed)
    tokens = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev, generator=g)
    targets = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev, generator=g)
    loss_fn = nn.CrossEntropyLoss()
    torch.cuda.synchronize()

    step_s = []
    losses = []
    for step in range(a.steps):
        t0 = time.perf_counter()
        torch.cuda.nvtx.range_push("step")
        with torch.profiler.record_function("step"):
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(tokens)
                loss = loss_fn(out.view(-1, a.vocab).float(), targets.view(-1))
            loss.backward()
            grads = [p.grad for p in params]
            flat = torch._utils._flatten_dense_tensors(grads)
            dist.all_reduce(flat)  # one NCCL all_reduce per step
            flat.div_(dist.get_world_size())
            for gr, synced in zip(grads, torch._utils._unflatten_dense_tensors(flat, grads)):
                gr.copy_(synced)
            opt.step()
            torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        step_s.append(time.perf_counter() - t0)
        losses.append(float(loss.detach()))

    if prof is not None:
        prof.stop()
        os.makedirs(os.path.dirname(os.path.abspath(a.trace)), exist_ok=True)
        prof.export_chrome_trace(a.trace)
    dist.destroy_process_group()

    measured = step_s[a.warmup:]
    total = sum(measured)
    srt = sorted(measured)
    result = {
        "mode": a.mode,
        "steps": a.steps,
        "warmup": a.warmup,
        "measured_steps": len(measured),
        "measured_s": total,
        "steps_per_s": len(measured) / total if total > 0 else 0.0,
        "median_step_ms": 1000 * srt[len(srt) // 2],
        "step_ms": [round(1000 * s, 3) for s in step_s],
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if hasattr(torch.cuda, "nccl") else None,
        "device": torch.cuda.get_device_name(0),
        "trace": a.trace,
    }
    with open(a.result, "w") as f:
        json.dump(result, f, indent=1)
    print("GPU_VALIDATE_RESULT " + json.dumps({k: v for k, v in result.items() if k != "step_ms"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
