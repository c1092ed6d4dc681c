#!/usr/bin/env python3
"""TL112 `cuda-in-dataloader-workers`: what a dataset that moves each sample to the GPU in
`__getitem__` costs when a `DataLoader` runs it in worker processes, against moving the batch
in the training loop.

Variants, one process each (a CUDA context is per process):
- the dataset on the host, the batch moved in the loop, 4 workers (what the rule asks for);
- `.cuda()` in `__getitem__`, no workers;
- `.cuda()` in `__getitem__`, 4 forked workers, after this process has used CUDA;
- `.cuda()` in `__getitem__`, 4 spawned workers.
Prints the device memory in use on the whole card (NVML's view, through
`torch.cuda.mem_get_info`: other processes' CUDA contexts included) while the loader runs,
above what it was before the loader started, and what this process's allocator holds.

A benchmark, not a test: needs torch and a CUDA device. Usage:
python3 bench/measurements/cuda_in_dataloader_workers.py [--workers N]
"""

import argparse
import subprocess
import sys

import torch
from torch.utils.data import DataLoader, Dataset

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
from measure import pick_device  # noqa: E402


class OnHost(Dataset):
    def __len__(self):
        return 256

    def __getitem__(self, i):
        return torch.full((3, 224, 224), float(i))


class MovesInWorker(OnHost):
    def __getitem__(self, i):
        return torch.full((3, 224, 224), float(i)).cuda()


def used_on_card():
    free, total = torch.cuda.mem_get_info()
    return total - free


VARIANTS = {
    "host dataset, batch moved in the loop": (OnHost, None, True),
    ".cuda() in __getitem__, no workers": (MovesInWorker, None, False),
    ".cuda() in __getitem__, forked workers": (MovesInWorker, "fork", False),
    ".cuda() in __getitem__, spawned workers": (MovesInWorker, "spawn", False),
}


def run(variant, workers):
    dataset_class, context, move_in_loop = VARIANTS[variant]
    torch.zeros(1, device="cuda")  # the training process has used CUDA, as a script has
    before = used_on_card()
    loader = DataLoader(dataset_class(), batch_size=32,
                        num_workers=0 if context is None and not move_in_loop else workers,
                        multiprocessing_context=context if context else None,
                        persistent_workers=False)
    peak, batches = 0, 0
    try:
        for batch in loader:
            if move_in_loop:
                batch = batch.cuda(non_blocking=True)
            peak = max(peak, used_on_card() - before)
            batches += 1
            del batch
    except RuntimeError as error:
        first = str(error).strip().splitlines()
        reason = next((line for line in first if "CUDA" in line), first[-1] if first else "")
        print(f"{variant:42s} failed after {batches} batches: {reason.strip()[:150]}")
        return
    print(f"{variant:42s} {batches} batches; card memory in use above the start, at most "
          f"{peak / 2**20:7.1f} MiB; this process's allocator {torch.cuda.memory_reserved() / 2**20:.0f} MiB")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--variant", choices=list(VARIANTS))
    args = parser.parse_args()
    if args.variant:
        run(args.variant, args.workers)
        return
    device = pick_device()
    if device.type != "cuda":
        print("needs a CUDA device: a worker's CUDA context is what this measures")
        return
    print(f"batches of 32 × 3×224×224 float32 (18.4 MiB), {args.workers} workers")
    for variant in VARIANTS:
        subprocess.run([sys.executable, __file__, "--workers", str(args.workers), "--variant", variant],
                       check=False, timeout=300)


if __name__ == "__main__":
    main()
