"""Forum case: "OOM with gigabytes cached": 6 MiB buffers share the allocator's 20 MiB
segments; freeing two of every three leaves each segment partly in use, so the cache holds
hundreds of MiB free that no larger request can use, and none of it can be given back."""
import torch

device = "cuda" if torch.cuda.is_available() else "cpu"
kept, dropped = [], []
for i in range(120):
    buffer = torch.empty(6 << 20, dtype=torch.uint8, device=device)
    (kept if i % 3 == 0 else dropped).append(buffer)
del dropped
print("kept", len(kept), flush=True)
big = torch.empty(400 << 20, dtype=torch.uint8, device=device)
print("allocated", big.numel())
