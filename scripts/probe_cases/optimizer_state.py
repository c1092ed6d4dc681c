"""Forum case: "AdamW runs out of memory where SGD fits": the same model, trained by the
optimizer the first argument names (`adamw` or `sgd`, with momentum). No leak: the budget
shows the optimizer state, two moments per parameter for AdamW, one buffer for SGD."""
import sys

import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(*[nn.Linear(4096, 4096) for _ in range(8)]).to(device)
if sys.argv[1] == "adamw":
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
else:
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
for step in range(20):
    x = torch.randn(64, 4096, device=device)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done", sys.argv[1])
