"""Forum case: "feature extraction runs out of memory halfway": per-batch features are kept in a
list on the GPU (no graph: no_grad is on), so the list holds every batch's output."""
import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"
backbone = nn.Sequential(nn.Linear(512, 4096), nn.ReLU(), nn.Linear(4096, 4096)).to(device)
backbone.eval()
features = []
with torch.no_grad():
    for step in range(400):
        images = torch.randn(256, 512, device=device)
        features.append(backbone(images))
print("features", len(features))
