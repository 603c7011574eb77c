"""A CPU training loop as a PyTorch user writes it, with NVTX ranges and DataLoader workers (fork).

Run bare and under LD_PRELOAD=libtprof.so by scripts/torch-check.sh: its stdout must be identical
(the loss values are deterministic) and its exit code 0 both times.
"""
import contextlib

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    x = torch.randn(512, 32)
    y = (x.sum(dim=1, keepdim=True) > 0).float()
    loader = DataLoader(TensorDataset(x, y), batch_size=64, num_workers=2, multiprocessing_context="fork")
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.BCEWithLogitsLoss()
    print("cuda available:", torch.cuda.is_available())
    for epoch in range(3):
        total = 0.0
        # The second epoch runs under the program's own profiler (Kineto), as users do.
        prof = profile(activities=[ProfilerActivity.CPU]) if epoch == 1 else contextlib.nullcontext()
        with prof:
            for step, (xb, yb) in enumerate(loader):
                torch.cuda.nvtx.range_push(f"step {epoch}.{step}")
                torch.cuda.nvtx.range_push("forward")
                loss = loss_fn(model(xb), yb)
                torch.cuda.nvtx.range_pop()
                opt.zero_grad()
                loss.backward()
                opt.step()
                torch.cuda.nvtx.range_pop()
                total += loss.item()
        if epoch == 1:
            print("own profiler recorded events:", len(prof.events()) > 0)
        print(f"epoch {epoch} loss {total:.6f}")
    print("done")


if __name__ == "__main__":
    main()
