"""Forum case: "validation OOMs at the third epoch, training alone is fine".

validate() runs the model with grad on and sums the loss tensors, and every epoch's result is
kept: each validation keeps all its batches' activations, epoch after epoch.
"""
import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(
    nn.Linear(2048, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 10)
).to(device)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()


def batches(n):
    for _ in range(n):
        yield torch.randn(256, 2048, device=device), torch.randint(0, 10, (256,), device=device)


def validate():
    model.eval()
    total = 0
    for x, y in batches(40):
        total += criterion(model(x), y)
    model.train()
    return total / 40


history = []
for epoch in range(10):
    for x, y in batches(20):
        opt.zero_grad()
        criterion(model(x), y).backward()
        opt.step()
    val_loss = validate()
    history.append(val_loss)
    print("epoch", epoch, float(val_loss), flush=True)
