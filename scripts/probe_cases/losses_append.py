"""Forum case: "memory creeps up every step": `losses.append(loss)` keeps each step's graph."""
import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 1)).to(device)
opt = torch.optim.Adam(model.parameters())
criterion = nn.MSELoss()
losses = []
for step in range(300):
    x = torch.randn(128, 1024, device=device)
    y = torch.randn(128, 1, device=device)
    loss = criterion(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss)
print("mean loss", sum(float(v) for v in losses) / len(losses))
