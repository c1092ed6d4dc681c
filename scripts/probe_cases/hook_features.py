"""Forum case: "memory grows every batch since I added a hook to look at the activations": a
forward hook appends each output to a list, so the list keeps every batch's feature map on the
GPU (with its graph: the model trains)."""
import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(nn.Linear(512, 4096), nn.ReLU(), nn.Linear(4096, 10)).to(device)
activations = []


def keep(module, inputs, output):
    activations.append(output)


model[1].register_forward_hook(keep)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(400):
    images = torch.randn(256, 512, device=device)
    loss = model(images).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("activations", len(activations))
