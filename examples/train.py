"""Train a small classifier on synthetic data: a realistic script with memory hazards.

Run torchlint on it from the repository root:

    cargo run --release -- examples/train.py
"""
import argparse
import logging
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

logger = logging.getLogger("train")


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--resume", default="")
    parser.add_argument("--out", default="classifier.pt")
    return parser.parse_args()


def make_data(n=2048, features=32, classes=4):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, features, generator=g)
    y = (x[:, :classes].argmax(dim=1)).long()
    return TensorDataset(x, y)


def build_model(features=32, classes=4):
    return nn.Sequential(nn.Linear(features, 128), nn.ReLU(), nn.Linear(128, classes))


def validate(model, loader, device):
    model.eval()
    predictions, labels = [], []
    for x, y in loader:
        predictions.append(model(x.to(device)).argmax(dim=1))
        labels.append(y)
    return (torch.cat(predictions).cpu() == torch.cat(labels)).float().mean().item()


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO)
    device = "cuda" if torch.cuda.is_available() else "cpu"

    # left on after chasing a NaN last week
    torch.autograd.set_detect_anomaly(True)

    model = build_model().to(device)
    if args.resume and os.path.exists(args.resume):
        model.load_state_dict(torch.load(args.resume))

    loader = DataLoader(
        make_data(),
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=os.cpu_count(),
        pin_memory=True,
    )
    val_loader = DataLoader(make_data(n=512), batch_size=256)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    for epoch in range(args.epochs):
        model.train()
        running = 0.0
        for step, (x, y) in enumerate(loader):
            x, y = x.to(device), y.to(device)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            running += loss
            if step % 10 == 0:
                # "frees memory" -- it does not, and it slows every step down
                torch.cuda.empty_cache()
        logger.info("epoch %d loss %.4f", epoch, running / len(loader))
        logger.info("epoch %d accuracy %.3f", epoch, validate(model, val_loader, device))

    torch.save(model.state_dict(), args.out)


if __name__ == "__main__":
    main()
