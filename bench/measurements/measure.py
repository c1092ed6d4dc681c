"""What the measurement scripts beside this file share: the device they run on, memory read
the same way, and a variant's memory after each step printed with its growth per step."""

import resource

import torch


def pick_device():
    """CUDA when there is one, else the CPU; says which, with torch's version."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(f"torch {torch.__version__}, device {device}"
          + (f" ({torch.cuda.get_device_name()})" if device.type == "cuda" else ""))
    return device


def current_memory(device):
    """Device memory allocated now, or on the CPU the process's resident set now (not its peak:
    a variant run after one that grew would read flat)."""
    if device.type == "cuda":
        torch.cuda.synchronize()
        return torch.cuda.memory_allocated()
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def report_steps(variant, seen, width):
    """Prints the memory above the start after each step, and the growth per step past the
    first (which allocates what every step reuses)."""
    per_step = (seen[-1] - seen[1]) / max(1, len(seen) - 2)
    mib = [round(value / 2**20, 1) for value in seen]
    print(f"{variant:{width}s} MiB after each step: {mib}")
    print(f"{'':{width}s} growth per step: {per_step / 2**20:.2f} MiB")
