"""Forum case: "OOM in the first forward": no leak, the batch is simply too big for the card
(or for the share of it the script may use): a one-time peak of activations."""
import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(nn.Linear(4096, 8192), nn.GELU(), nn.Linear(8192, 8192), nn.GELU(),
                      nn.Linear(8192, 1000)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
batch = int(__import__("sys").argv[1]) if len(__import__("sys").argv) > 1 else 32768
for step in range(3):
    x = torch.randn(batch, 4096, device=device)
    loss = model(x).logsumexp(dim=1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done")
