"""torchlint probe runner: runs a training script as ``__main__`` and watches its flagged lines.

``torchlint probe`` embeds this file, writes it to a private temp dir and starts
``python runner.py --plan PLAN.json``. The plan (src/probe/plan.rs) names the script, its argv
and the statements to watch; the runner reports what it sees as JSON lines on the already-open
file descriptor ``events_fd`` (src/probe/events.rs). Those two Rust files are the protocol.

Ground rules (docs/hazards.md sections 5.6, 6 and 7):

* the script behaves as under ``python script.py args``: same ``__main__``, argv, sys.path,
  exit status and traceback; a failure of the runner becomes an ``error`` event and the script
  goes on unwatched, it never crashes because of us;
* only the flagged statements are watched: ``sys.monitoring`` LINE events on the code objects
  that hold them (3.12+), else a ``settrace`` tracer that traces only those code objects;
* a hit is observed at the next line event of the same frame, when the line has run: cheap
  predicates and counters on every hit, the autograd-graph walk only after the warm-up; torch
  is never imported and CUDA never initialised by the runner;
* standard library only, Python 3.8+ syntax.

Layout: the events pipe (Emitter); counters and the sampler thread; how a value is described;
from a finding's line to a statement, its trigger line, the expressions to read and the code
objects that run it; the hit bookkeeping shared by both mechanisms (Probe); the mechanisms
(Monitoring, Settrace); running the script as `python script.py` would (run).
"""

import ast
import atexit
import builtins
import collections
import itertools
import json
import os
import sys
import threading
import time
import types

PY = sys.version_info[:2]
RUNNER_GLOBALS = globals()
RUNNER_FILE = os.path.realpath(__file__)
SELF = sys.modules.get(__name__)  # keeps this module (and its globals) alive once replaced

SAMPLE_PERIOD = 0.1  # seconds between `sample` events
# Whether samples read the whole device's used memory from in here (torchlint has no NVML to
# read it from outside); set from the plan.
READ_DEVICE = [False]
NODE_LIMIT = 200000  # autograd nodes walked per value
SCAN_LIMIT = 100000  # container items scanned per value
WALK_LIMIT = 10000  # objects walked in a torch.load result
MODULE_LIMIT = 10000  # submodules walked when counting hooks
MAX_ERRORS = 20  # distinct `error` events

CO_OPTIMIZED = 0x0001
# Code objects that hold expressions only: a statement never lives in them.
EXPRESSION_SCOPES = frozenset(("<lambda>", "<genexpr>", "<listcomp>", "<setcomp>", "<dictcomp>"))
# Methods that store their argument in the receiver: the receiver is the value to watch.
MUTATORS = frozenset((
    "append", "extend", "insert", "add", "appendleft", "extendleft", "put", "put_nowait",
    "update", "setdefault",
))
HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
CONTAINERS = (list, tuple, dict, set, frozenset, collections.deque)

perf_counter = time.perf_counter
wall_clock = time.time
# One encoder for every event (json.dumps with arguments builds a new one each call).
encode_json = json.JSONEncoder(separators=(",", ":"), default=str, check_circular=False).encode


# --------------------------------------------------------------------------------------------
# Events pipe
# --------------------------------------------------------------------------------------------

class Emitter:
    """Writes events, one JSON object per line, to the pipe torchlint reads.

    Hits and samples are batched (a pipe write that wakes the reader costs more than encoding
    the event): written once 32 KiB or 50 ms have piled up, at the next sample (every 0.1 s),
    and at once for `start`, `complete`, `error` and `exit`. Only the original process writes
    (forked DataLoader workers inherit the fd, and close it); a pipe that is gone (EPIPE/EBADF)
    silences the runner, never the script."""

    BATCH_BYTES = 32768
    BATCH_SECONDS = 0.05

    def __init__(self, fd):
        self.fd = fd
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.dead = not isinstance(fd, int) or fd < 0
        self.errors = set()
        self.batch = []
        self.batch_size = 0
        self.batch_since = 0.0
        if not self.dead:
            try:
                os.set_inheritable(fd, False)  # exec'ed subprocesses must not keep it open
            except OSError:
                self.dead = True

    def emit(self, event, urgent=True, last=False):
        """Queues one event; writes the batch when `urgent`, full or old. `last`: `exit`."""
        if self.dead or os.getpid() != self.pid:
            return
        try:
            data = (encode_json(event) + "\n").encode("utf-8")
        except (TypeError, ValueError) as exc:
            message = "runner: unserialisable event: %s" % exc
            data = json.dumps({"ev": "error", "t": wall_clock(), "message": message}) + "\n"
            data = data.encode()
        now = perf_counter()
        with self.lock:
            if self.dead:
                return
            if not self.batch:
                self.batch_since = now
            self.batch.append(data)
            self.batch_size += len(data)
            if (urgent or last or self.batch_size >= self.BATCH_BYTES
                    or now - self.batch_since >= self.BATCH_SECONDS):
                self.write_batch()
            if last:
                self.dead = True  # nothing may follow `exit`

    def flush(self):
        """Writes what is batched now."""
        with self.lock:
            if not self.dead and self.batch:
                self.write_batch()

    def write_batch(self):
        """Writes what is batched (the lock is held)."""
        data = b"".join(self.batch)
        del self.batch[:]
        self.batch_size = 0
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view):]
        except OSError:
            self.dead = True

    def error(self, message):
        """An `error` event, once per distinct message."""
        if message in self.errors or len(self.errors) >= MAX_ERRORS:
            return
        self.errors.add(message)
        self.emit({"ev": "error", "t": wall_clock(), "message": message})

    def close_in_child(self):
        """After a fork: the child never writes, and must not hold the pipe open."""
        self.dead = True
        try:
            os.close(self.fd)
        except (OSError, TypeError):
            pass


def describe_failure(where, exc):
    """One line for an `error` event: what failed, the exception, and the runner line."""
    place = ""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_globals is RUNNER_GLOBALS:
            place = " (runner line %d, in %s)" % (tb.tb_lineno, tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    return "runner: %s: %s: %s%s" % (where, type(exc).__name__, exc, place)


# --------------------------------------------------------------------------------------------
# Counters: host RSS from /proc, CUDA allocator statistics from the script's own torch
# --------------------------------------------------------------------------------------------

try:
    PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
except (AttributeError, ValueError, OSError):
    PAGE_SIZE = 4096
try:
    STATM_FD = os.open("/proc/self/statm", os.O_RDONLY)  # opened once: a pread is ~2 us
except (OSError, AttributeError):
    STATM_FD = None


def read_rss():
    """Resident set size of this process in bytes (no psutil), or None off Linux."""
    if STATM_FD is None:
        return None
    try:
        return int(os.pread(STATM_FD, 128, 0).split()[1]) * PAGE_SIZE
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def loaded_torch():
    """The script's torch once it is completely imported; None before (never imports it).

    The sampler thread may look while the main thread is still importing torch: a module whose
    spec says `_initializing` is left alone."""
    module = sys.modules.get("torch")
    if module is None:
        return None
    spec = module.__dict__.get("__spec__")
    if spec is not None and getattr(spec, "_initializing", False):
        return None
    return module


def initialised_cuda(torch):
    """`torch.cuda` when the script has initialised CUDA, else None (we never initialise it)."""
    cuda = torch.__dict__.get("cuda")
    if cuda is None:
        return None
    try:
        return cuda if cuda.is_initialized() else None
    except Exception:
        return None


def pick(stats, *path):
    """A counter from the nested (`_cuda_memoryStats`) or flat (`memory_stats`) dictionary."""
    value = stats
    try:
        for key in path:
            value = value[key]
        return int(value)
    except (KeyError, TypeError, IndexError, ValueError):
        pass
    try:
        value = stats.get(".".join(path))
        return None if value is None else int(value)
    except (AttributeError, TypeError, ValueError):
        return None


class AllocatorStats:
    """The caching allocator's statistics through the cheapest call that works.

    `torch._C._cuda_memoryStats(device)` (nested dict, ~21 us) first; `torch.cuda.memory_stats`
    (~160 us, hazards 5.6) when the private call is missing."""

    nested = True
    host_nested = True

    @classmethod
    def device(cls, torch, cuda, index):
        if cls.nested:
            try:
                return torch._C._cuda_memoryStats(index)
            except Exception:
                cls.nested = False
        return cuda.memory_stats(index)

    @classmethod
    def pinned(cls, torch, cuda):
        """Bytes held by the pinned host allocator (feature-tested: absent in older torch)."""
        stats = None
        if cls.host_nested:
            try:
                stats = torch._C._cuda_hostMemoryStats()
            except Exception:
                cls.host_nested = False
        if stats is None:
            function = getattr(cuda, "host_memory_stats", None)
            if function is None:
                return None
            stats = function()
        for path in (("allocated_bytes", "all", "current"), ("allocated_bytes", "current")):
            value = pick(stats, *path)
            if value is not None:
                return value
        return None


def add_hit_counters(event, want_pinned, want_allocs):
    """Counters of a hit, read right after the line ran (the current device's allocator)."""
    event["rss"] = read_rss()
    torch = loaded_torch()
    cuda = initialised_cuda(torch) if torch is not None else None
    if cuda is None:
        return
    device = cuda.current_device()
    event["device"] = device
    stats = AllocatorStats.device(torch, cuda, device)
    event["allocated"] = pick(stats, "allocated_bytes", "all", "current")
    event["reserved"] = pick(stats, "reserved_bytes", "all", "current")
    if want_allocs:
        event["device_allocs"] = pick(stats, "num_device_alloc")
        event["device_frees"] = pick(stats, "num_device_free")
    if want_pinned:
        event["pinned"] = AllocatorStats.pinned(torch, cuda)


def sample_event():
    """A `sample`: RSS always; once torch is loaded whether anomaly mode is on (a process-wide
    flag); allocator totals over the visible devices once CUDA is up.

    Summed over devices because a background thread has no reliable "current device"; torchlint
    restricts the script to one GPU when it watches one, and unused devices add zeros."""
    event = {"ev": "sample", "t": wall_clock(), "rss": read_rss()}
    torch = loaded_torch()
    if torch is None:
        return event
    anomaly = torch.__dict__.get("is_anomaly_enabled")
    if anomaly is not None:
        event["anomaly_enabled"] = bool(anomaly())
    cuda = initialised_cuda(torch)
    if cuda is not None:
        add_device_totals(event, torch, cuda)
        if READ_DEVICE[0]:
            add_device_used(event, torch, cuda)
    return event


def add_device_used(event, torch, cuda):
    """The watched device's used memory (index 0: torchlint makes the watched GPU the only one
    visible, or watches the first), read through the script's own context: only once the
    allocator holds memory there, since asking a device without one would create a context
    (half a gigabyte) the script never made."""
    reserved = pick(AllocatorStats.device(torch, cuda, 0), "reserved_bytes", "all", "current")
    if not reserved:
        return
    free, total = cuda.mem_get_info(0)
    event["device_used"] = int(total) - int(free)


def add_device_totals(event, torch, cuda):
    totals = {}
    for index in range(cuda.device_count()):
        stats = AllocatorStats.device(torch, cuda, index)
        for name, path in (("allocated", ("allocated_bytes", "all", "current")),
                           ("reserved", ("reserved_bytes", "all", "current")),
                           ("peak_allocated", ("allocated_bytes", "all", "peak")),
                           ("peak_reserved", ("reserved_bytes", "all", "peak")),
                           ("alloc_retries", ("num_alloc_retries",))):
            value = pick(stats, *path)
            if value is not None:
                totals[name] = totals.get(name, 0) + value
    event.update(totals)
    event["pinned"] = AllocatorStats.pinned(torch, cuda)
    allowed = allowed_bytes(torch, cuda)
    if allowed is not None:
        event["allowed"] = allowed


TOTAL_MEMORY = {}


def allowed_bytes(torch, cuda):
    """What the allocator may hold on the watched device when a cap is set (the script's own
    `set_per_process_memory_fraction`, or `--max-memory`): the projections count from it, not
    from the card's free memory. None without a cap, or where torch cannot say."""
    getter = getattr(torch._C, "_cuda_getMemoryFraction", None)
    if getter is None:
        return None
    fraction = float(getter(0))
    if not 0.0 <= fraction < 1.0:
        return None
    total = TOTAL_MEMORY.get(0)
    if total is None:
        total = TOTAL_MEMORY[0] = int(cuda.get_device_properties(0).total_memory)
    return int(fraction * total)


def cap_device_memory(emitter, torch, cap):
    """`--max-memory`: the script's allocator may hold at most `cap` bytes on the watched device
    (`set_per_process_memory_fraction`), so that a slow leak runs out of memory within the
    probe's run. Queued on torch's lazy-init calls as soon as torch is imported: applied when
    the script initialises CUDA, and a script that never uses the GPU gets no context from it."""

    def apply():
        try:
            total = int(torch.cuda.get_device_properties(0).total_memory)
            if cap >= total:
                emitter.error("--max-memory (%d bytes) is not below the device's %d bytes: "
                              "the script runs without a cap" % (cap, total))
                return
            torch.cuda.set_per_process_memory_fraction(cap / total, 0)
        except Exception as exc:
            emitter.error(describe_failure("cannot cap the device memory (--max-memory)", exc))

    torch.cuda._lazy_call(apply)


class TorchImport:
    """Runs callbacks the moment the script's `import torch` completes, before its next line:
    the budget's hooks must be in place before the script builds its model. A meta-path finder
    that lets the other finders find torch and wraps that one module's `exec_module`; it takes
    itself off `sys.meta_path` at once, so no other import passes through it."""

    def __init__(self, emitter, callbacks):
        self.emitter = emitter
        self.callbacks = callbacks

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        self.remove()
        spec = None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if find is not None:
                spec = find(name, path, target)
                if spec is not None:
                    break
        loader = getattr(spec, "loader", None)
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None:
            return spec
        callbacks, emitter = self.callbacks, self.emitter

        def exec_then_call_back(module):
            exec_module(module)
            try:
                del loader.exec_module  # the instance attribute set below: the class's again
            except AttributeError:
                pass
            for callback in callbacks:
                try:
                    callback(module)
                except Exception as exc:
                    emitter.error(describe_failure("preparing torch for the probe", exc))

        loader.exec_module = exec_then_call_back
        return spec

    def install(self):
        if "torch" in sys.modules:
            for callback in self.callbacks:
                callback(sys.modules["torch"])
        else:
            sys.meta_path.insert(0, self)

    def remove(self):
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass


def live(refs):
    """The objects of a dict of weak references that are still alive; dead entries are dropped."""
    objects = []
    for key, ref in list(refs.items()):
        obj = ref()
        if obj is None:
            refs.pop(key, None)
        else:
            objects.append(obj)
    return objects


class Budget:
    """What the script's parameters, their gradients and its optimizers' state hold: the split
    of device memory at its peak and at an out-of-memory error. Found by instrumenting their
    construction, not by names: torch's global hook on parameter registration sees every
    `nn.Module` parameter (frozen ones too), its global hook before `optimizer.step()` every
    optimizer that holds state. Both are in place from the moment torch is imported."""

    def __init__(self):
        self.parameters = {}  # id -> weakref to a Parameter
        self.optimizers = {}  # id -> weakref to an optimizer
        self.last_allocated = 0

    def install(self, torch):
        import weakref
        self.weakref = weakref.ref
        import importlib
        modules = importlib.import_module("torch.nn.modules.module")
        register = getattr(modules, "register_module_parameter_registration_hook", None)
        if register is not None:
            register(self.saw_parameter)
        optim = importlib.import_module("torch.optim.optimizer")  # torch imports it lazily
        # Before the step, not after: the first step creates the state, and a peak read while
        # it runs must count that state as the optimizer's, not as other tensors.
        on_step = getattr(optim, "register_optimizer_step_pre_hook", None)
        if on_step is not None:
            on_step(self.saw_optimizer)

    def saw_parameter(self, module, name, param):
        if param is not None:
            self.parameters[id(param)] = self.weakref(param)

    def saw_optimizer(self, optimizer, args, kwargs):
        key = id(optimizer)
        if key not in self.optimizers:
            self.optimizers[key] = self.weakref(optimizer)

    def alive(self):
        """The parameters and optimizers still alive: module parameters, and the tensors an
        optimizer trains without a module (raw leaf tensors), which are parameters too."""
        alive = live(self.parameters)
        optimizers = live(self.optimizers)
        for optimizer in optimizers:
            for group in list(optimizer.param_groups):
                alive.extend(group.get("params", ()))
        return alive, optimizers

    def gradient_graphs(self):
        """TL110: how many parameters have a gradient, and how many of those gradients carry an
        autograd graph (`.grad.grad_fn`). After `backward(create_graph=True)` each such graph
        holds its parameter, which holds the gradient: a cycle autograd never frees, until the
        gradient is set to None or detached (`zero_grad()`)."""
        grads = with_graph = 0
        seen = set()
        for param in self.alive()[0]:
            if id(param) in seen:
                continue
            seen.add(id(param))
            grad = getattr(param, "grad", None)
            if grad is None:
                continue
            grads += 1
            if getattr(grad, "grad_fn", None) is not None:
                with_graph += 1
        return grads, with_graph

    def event(self, torch, at):
        """A `budget` event: bytes of parameters, gradients and each optimizer class's state, on
        the device when the script uses CUDA (host tensors otherwise: CPU mode), each storage
        counted once (tied weights, views)."""
        cuda = initialised_cuda(torch)
        on_device = cuda is not None
        seen = set()

        def size(tensor):
            if tensor is None or bool(getattr(tensor, "is_cuda", False)) != on_device:
                return 0
            try:
                storage = tensor.untyped_storage()
                key = storage.data_ptr()
                if key in seen or key == 0:
                    return 0
                seen.add(key)
                return int(storage.nbytes())
            except Exception:
                return 0

        alive, optimizers = self.alive()
        parameters = sum(size(param) for param in alive)
        gradients = sum(size(getattr(param, "grad", None)) for param in alive)
        by_class = {}
        tensor_type = torch.Tensor
        for optimizer in optimizers:
            held = 0
            for state in list(optimizer.state.values()):
                for value in list(state.values()) if isinstance(state, dict) else ():
                    if isinstance(value, tensor_type):
                        held += size(value)
            name = type(optimizer).__name__
            by_class[name] = by_class.get(name, 0) + held
        event = {
            "ev": "budget", "t": wall_clock(), "at": at, "device": on_device,
            "parameters": parameters, "gradients": gradients,
            "optimizers": [{"class": name, "bytes": held} for name, held in sorted(by_class.items())],
        }
        if on_device:
            stats = AllocatorStats.device(torch, cuda, 0)
            event["allocated"] = pick(stats, "allocated_bytes", "all", "current")
            event["reserved"] = pick(stats, "reserved_bytes", "all", "current")
        return event

    def at_peak(self, sample):
        """Whether a sample is a new peak worth a budget: 5% and 8 MiB above the last one's."""
        allocated = sample.get("allocated")
        if not allocated or allocated < self.last_allocated * 1.05 + (8 << 20):
            return False
        self.last_allocated = allocated
        return True


BUDGET = Budget()

ATTRIBUTED_LINES = 30  # lines of the user's code per snapshot, the most bytes first


def is_module_call(frame):
    """Whether a recorded stack frame is `nn.Module.__call__` running a module's forward."""
    return (frame.get("name") in ("_call_impl", "_wrapped_call_impl")
            and frame.get("filename", "").replace("\\", "/").endswith("torch/nn/modules/module.py"))


class Attribution:
    """`--attribute`: which lines of the user's code allocated the memory that is live. The
    allocator keeps the Python stack of every live allocation
    (`torch.cuda.memory._record_memory_history` with state only: no history of frees, about
    2 us per allocation), started when the script initialises CUDA; a snapshot at each budget
    (a new peak, the end, an out-of-memory error) sums the live blocks by the innermost frame in
    the user's code."""

    def __init__(self):
        self.ready = False  # recording, and the snapshot's own imports done on the script's thread

    def install(self, emitter, torch):
        def record():
            try:
                torch.cuda.memory._record_memory_history(
                    enabled="state", context="state", stacks="python")
                # The first snapshot that symbolizes a Python frame makes torch import
                # torch._inductor (and torch._dynamo with it). Taken from the sampler thread
                # while the script imports torch._dynamo, the two imports deadlock and Python
                # breaks the cycle with a partially initialised module: the script fails. So
                # that import happens here, on the script's thread, once, as CUDA starts.
                probe = torch.empty(1, device="cuda")
                torch.cuda.memory._snapshot()
                del probe
                self.ready = True
            except Exception as exc:
                emitter.error(describe_failure("cannot record allocation stacks (--attribute)", exc))

        torch.cuda._lazy_call(record)

    def event(self, torch, at):
        snapshot = torch.cuda.memory._snapshot()
        held = {}
        total = in_forward = 0
        for segment in snapshot.get("segments", ()):
            for block in segment.get("blocks", ()):
                if block.get("state") != "active_allocated":
                    continue
                size = int(block.get("size", 0))
                total += size
                where = ("", 0)  # allocated outside the user's code (or no stack recorded)
                frames = block.get("frames") or ()
                for frame in frames:
                    real = UserCode.real_path(frame.get("filename", ""))
                    if real is not None:
                        where = (real, int(frame.get("line", 0)))
                        break
                if any(is_module_call(frame) for frame in frames):
                    in_forward += size
                entry = held.get(where)
                if entry is None:
                    held[where] = [size, 1]
                else:
                    entry[0] += size
                    entry[1] += 1
        lines = sorted(held.items(), key=lambda item: -item[1][0])[:ATTRIBUTED_LINES]
        return {
            "ev": "attribution", "t": wall_clock(), "at": at, "total": total,
            "in_forward": in_forward,
            "lines": [{"file": path, "line": line, "bytes": size, "blocks": blocks}
                      for (path, line), (size, blocks) in lines],
        }


ATTRIBUTION = Attribution()
STEP_RULE = "STEP"  # the plan's step target: the training loop's header (`--attribute`)
STEP_SNAPSHOTS = 40  # snapshots at step boundaries, at most


class Sampler(threading.Thread):
    """Emits a `sample` every 0.1 s: the timeline between hits (a daemon: never keeps the
    process alive)."""

    def __init__(self, emitter):
        threading.Thread.__init__(self, name="torchlint-sampler", daemon=True)
        self.emitter = emitter
        self.halt = threading.Event()

    def run(self):
        while not self.halt.wait(SAMPLE_PERIOD):
            if self.emitter.dead:
                return
            try:
                event = sample_event()
            except Exception as exc:
                # A torch that cannot report is no reason to lose the RSS timeline.
                self.emitter.error(describe_failure("reading the allocator for a sample", exc))
                event = {"ev": "sample", "t": wall_clock(), "rss": read_rss()}
            self.emitter.emit(event)  # also writes the hits batched since the last sample
            if BUDGET.at_peak(event):
                emit_budget(self.emitter, "peak")


def emit_budget(emitter, at):
    """Emits the memory budget now, if torch is loaded; a failure costs the budget only."""
    torch = loaded_torch()
    if torch is None:
        return
    attribution = None
    if ATTRIBUTION.ready and initialised_cuda(torch) is not None:
        try:
            attribution = ATTRIBUTION.event(torch, at)
        except Exception as exc:
            emitter.error(describe_failure("reading the allocation stacks (--attribute)", exc))
    try:
        event = BUDGET.event(torch, at)
        if attribution is not None:
            # What the stacks tell apart: the tensors a module's forward made (its outputs and
            # what autograd saved for the backward) from the rest.
            event["activations"] = attribution["in_forward"]
        emitter.emit(event)
    except Exception as exc:
        emitter.error(describe_failure("reading the memory budget", exc))
    if attribution is not None:
        emitter.emit(attribution)


class ForkWarning:
    """Python 3.12+ warns when a process with several OS threads forks. When the sampler is the
    only thread besides the forking one, that warning is ours, not the script's: it is filtered
    for that fork (re-decided before every fork), so `-W error` scripts fork as they would."""

    def __init__(self, sampler):
        self.sampler = sampler
        self.entry = None

    def before_fork(self):
        if PY < (3, 12) or not self.sampler.is_alive():
            return
        try:
            with open("/proc/self/stat", "rb") as handle:
                threads = int(handle.read().rsplit(b")", 1)[1].split()[17])
        except (OSError, ValueError, IndexError):
            return
        try:
            self.filter(threads == 2)
        except Exception:
            pass

    def filter(self, wanted):
        import warnings
        if wanted and self.entry is None:
            warnings.filterwarnings(
                "ignore", category=DeprecationWarning,
                message=r"This process \(pid=%d\) is multi-threaded, use of \w+\(\)" % os.getpid())
            self.entry = warnings.filters[0]
        elif not wanted and self.entry is not None:
            entry, self.entry = self.entry, None
            if entry in warnings.filters:
                warnings.filters.remove(entry)
                mutated = getattr(warnings, "_filters_mutated", None)
                if mutated is not None:
                    mutated()


# --------------------------------------------------------------------------------------------
# Values: what the watched expression looks like right after the line ran
# --------------------------------------------------------------------------------------------

class TorchTypes:
    """torch classes, taken from sys.modules (never imported) and kept once present."""

    tensor = None
    module = None
    loader = None
    dtype_names = {}

    @classmethod
    def refresh(cls):
        if cls.tensor is None:
            torch = loaded_torch()
            if torch is not None:
                cls.tensor = torch.__dict__.get("Tensor")
        if cls.module is None:
            found = sys.modules.get("torch.nn.modules.module")
            if found is not None:
                cls.module = found.__dict__.get("Module")
        if cls.loader is None:
            found = sys.modules.get("torch.utils.data.dataloader")
            if found is not None:
                cls.loader = found.__dict__.get("DataLoader")


def dtype_name(dtype):
    """`float64` for `torch.float64` (cached: str() of a dtype is not free)."""
    name = TorchTypes.dtype_names.get(dtype)
    if name is None:
        name = str(dtype)
        if name.startswith("torch."):
            name = name[6:]
        TorchTypes.dtype_names[dtype] = name
    return name


def tensor_bytes(tensor):
    """Bytes of the tensor's elements (0 where the layout has no plain element count)."""
    try:
        return tensor.element_size() * tensor.nelement()
    except Exception:
        return 0


def graph_nodes(roots, limit=NODE_LIMIT):
    """The autograd nodes reachable from `roots` through `next_functions` (iterative, at most
    `limit`). The wrappers are kept alive during the walk so that their ids stay unique."""
    seen = set()
    keep = []
    stack = [root for root in roots if root is not None]
    while stack and len(seen) < limit:
        node = stack.pop()
        key = id(node)
        if key in seen:
            continue
        seen.add(key)
        keep.append(node)
        yield node
        try:
            successors = node.next_functions
        except Exception:
            continue
        for successor, _ in successors:
            if successor is not None and id(successor) not in seen:
                stack.append(successor)


def count_nodes(roots, limit=NODE_LIMIT):
    """How many autograd nodes are reachable from `roots` (bounded)."""
    return sum(1 for _ in graph_nodes(roots, limit))


class RetainedGraphUse:
    """Whether a later backward runs through a graph a line retained, before the line runs
    again: a pre-hook on each of the graph's nodes (not the parameters' `AccumulateGrad`
    nodes, which every step's graph shares) sets a flag. Read and removed at the next hit,
    whose `reused` tells of the previous one's graph; only on measured hits."""

    NODES = 2000  # nodes hooked per hit, at most

    def __init__(self):
        self.handles = []
        self.used = None

    def observe(self, event, code, frame):
        if self.used is not None:
            event["reused"] = self.used[0]
        remove_hooks(self.handles)
        self.handles = []
        self.used = None
        try:
            root = eval(code, frame.f_globals, frame.f_locals)
            grad_fn = getattr(root, "grad_fn", None)
        except Exception:
            return
        if grad_fn is None:
            return
        used = [False]

        def pre_hook(grad_outputs):
            used[0] = True

        for node in graph_nodes((grad_fn,), self.NODES):
            if type(node).__name__ != "AccumulateGrad":
                try:
                    self.handles.append(node.register_prehook(pre_hook))
                except Exception:
                    pass
        self.used = used


def describe_tensor(tensor, deep):
    """Graph, dtype, device, size and hooks of a tensor: each well under a microsecond; the
    graph walk (`deep`) only on measured hits."""
    grad_fn = tensor.grad_fn
    value = {
        "kind": "tensor",
        "grad_fn": grad_fn is not None,
        "dtype": dtype_name(tensor.dtype),
        "device": str(tensor.device),
        "bytes": tensor_bytes(tensor),
    }
    hooks = getattr(tensor, "_backward_hooks", None)
    value["hooks"] = len(hooks) if hooks else 0
    if deep:
        value["nodes"] = count_nodes((grad_fn,)) if grad_fn is not None else 0
    return value


def describe_container(container, deep, tensor_type):
    """Length, and over its tensor items (and the tensors one level inside tuple/list/dict
    items): how many carry a graph, how many are on the GPU, their bytes, the last one."""
    value = {"kind": "container", "len": len(container)}
    if tensor_type is None:
        return value
    with_grad = on_gpu = nbytes = 0
    last = None
    roots = [] if deep else None
    items = container.values() if isinstance(container, dict) else container
    for item in itertools.islice(items, SCAN_LIMIT):
        if isinstance(item, tensor_type):
            tensors = (item,)
        elif isinstance(item, (tuple, list)):
            tensors = [x for x in item[:16] if isinstance(x, tensor_type)]
        elif isinstance(item, dict):
            tensors = [x for x in itertools.islice(item.values(), 16) if isinstance(x, tensor_type)]
        else:
            continue
        grad = gpu = False
        for tensor in tensors:
            grad_fn = tensor.grad_fn
            if grad_fn is not None:
                grad = True
                if deep:
                    roots.append(grad_fn)
            if tensor.is_cuda:
                gpu = True
            nbytes += tensor_bytes(tensor)
            last = tensor
        with_grad += grad
        on_gpu += gpu
    value["items_with_grad"] = with_grad
    value["items_on_gpu"] = on_gpu
    value["bytes"] = nbytes
    if last is not None:
        value["grad_fn"] = last.grad_fn is not None
        value["dtype"] = dtype_name(last.dtype)
        value["device"] = str(last.device)
    if deep:
        value["nodes"] = count_nodes(roots)
    return value


def module_hooks(module):
    """Hooks registered on a module and its submodules (walks `_modules` without calls), so
    that `model[1].register_forward_hook` shows on `model` too."""
    total = 0
    seen = set()
    stack = [module]
    while stack and len(seen) < MODULE_LIMIT:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        attributes = getattr(current, "__dict__", None)
        if not attributes:
            continue
        for name in HOOK_DICTS:
            hooks = attributes.get(name)
            if hooks:
                total += len(hooks)
        children = attributes.get("_modules")
        if children:
            stack.extend(child for child in children.values() if child is not None)
    return total


def describe_loader(loader):
    """What decides a DataLoader's pinned memory: workers x prefetch_factor batches."""
    workers = int(getattr(loader, "num_workers", 0) or 0)
    prefetch = getattr(loader, "prefetch_factor", None)
    if workers == 0:
        prefetch = None
    elif prefetch is None:
        prefetch = 2  # DataLoader's default when workers > 0
    return {
        "kind": "loader",
        "workers": workers,
        "prefetch_factor": None if prefetch is None else int(prefetch),
        "pin_memory": bool(getattr(loader, "pin_memory", False)),
    }


def walk_loaded(obj, tensor_type, module_type):
    """Devices and bytes of the tensors in a `torch.load` result (dicts, sequences, modules;
    bounded, each tensor counted once)."""
    devices = set()
    nbytes = 0
    seen = set()
    stack = [obj]
    steps = 0
    while stack and steps < WALK_LIMIT:
        current = stack.pop()
        steps += 1
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, tensor_type):
            devices.add(str(current.device))
            nbytes += tensor_bytes(current)
        elif isinstance(current, dict):
            stack.extend(itertools.islice(current.values(), WALK_LIMIT))
        elif isinstance(current, (list, tuple, set, frozenset)):
            stack.extend(itertools.islice(current, WALK_LIMIT))
        elif module_type is not None and isinstance(current, module_type):
            attributes = current.__dict__
            for name in ("_parameters", "_buffers", "_modules"):
                members = attributes.get(name)
                if members:
                    stack.extend(member for member in members.values() if member is not None)
    return sorted(devices), nbytes


def module_dtype(module):
    """The widest floating dtype among a module's parameters (`float64` after `.double()`):
    a model cast to float64 is what TL105 flags on a model line."""
    widest = None
    try:
        for count, parameter in enumerate(module.parameters()):
            if count >= 10000:
                break
            if parameter.is_floating_point() and (
                    widest is None or parameter.element_size() > widest.element_size()):
                widest = parameter
    except Exception:
        return None
    return None if widest is None else str(widest.dtype).replace("torch.", "")


def describe(obj, deep, walk):
    """The `Value` fields for one object (everything but `expr`)."""
    TorchTypes.refresh()
    tensor_type = TorchTypes.tensor
    if tensor_type is not None and isinstance(obj, tensor_type):
        value = describe_tensor(obj, deep)
    elif TorchTypes.loader is not None and isinstance(obj, TorchTypes.loader):
        value = describe_loader(obj)
    elif TorchTypes.module is not None and isinstance(obj, TorchTypes.module):
        value = {"kind": "module", "hooks": module_hooks(obj)}
        dtype = module_dtype(obj)
        if dtype is not None:
            value["dtype"] = dtype
    elif isinstance(obj, CONTAINERS):
        value = describe_container(obj, deep, tensor_type)
    elif type(obj).__module__ == "queue" and isinstance(getattr(obj, "queue", None),
                                                       collections.deque):
        value = describe_container(obj.queue, deep, tensor_type)  # queue.Queue.put
    else:
        value = {"kind": "other"}
    if walk and tensor_type is not None:
        devices, nbytes = walk_loaded(obj, tensor_type, TorchTypes.module)
        value["devices"] = devices
        value["bytes"] = nbytes
    return value


def compiled_original(obj):
    """TL203: what `torch.compile` was given, for what it returned (a module for an
    `OptimizedModule`, whose `_torchdynamo_orig_callable` is a new bound method at every read;
    the function for a compiled function), else None."""
    original = getattr(obj, "_orig_mod", None)
    if original is None:
        original = getattr(obj, "_torchdynamo_orig_callable", None)
    return original


def dynamo_graphs():
    """Graphs dynamo compiled so far in this process, if the script has used it (never
    imported here: the counter is read only where dynamo is already loaded)."""
    utils = sys.modules.get("torch._dynamo.utils")
    counters = getattr(utils, "counters", None)
    if counters is None:
        return None
    try:
        return int(counters["stats"]["unique_graphs"])
    except Exception:
        return None


def forward_callee(text):
    """TL301: the callee of the forward call the finding labels (`model` for
    `model(x.cuda())`, `self.net` for `self.net(x)`), compiled; None when it is no plain
    Name/Attribute chain (nothing else is safe to evaluate) or no call at all."""
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        node = ast.parse(text.strip(), "<torchlint>", "eval").body
    except SyntaxError:
        return None
    callee = chain_text(node.func) if isinstance(node, ast.Call) else None
    if callee is None:
        return None
    return compile(callee, "<torchlint>", "eval", dont_inherit=True)


class ForwardWatch:
    """TL301: one forward of the model a loop trains, read while it runs: a forward pre-hook
    reads whether autocast is on for CUDA, grad mode and the parameters' dtype; a forward hook
    the dtype of its output. On the module the finding's forward calls, else (no such module
    in the frame, or `--watch`) on the first module with parameters called with grad on, found
    by a global pre-hook that removes itself at once. One forward per hit: the hooks do
    nothing after the first, and are removed when the hit is observed."""

    __slots__ = ("torch", "seen", "output_read", "handles", "finder")

    # `torch.is_autocast_enabled("cuda")` (2.4+), else the older CUDA-only form; decided once.
    autocast_by_device = None

    def __init__(self, torch):
        self.torch = torch
        self.seen = None
        self.output_read = False
        self.handles = []
        self.finder = None

    def arm(self, module):
        if module is not None:
            self.handles.append(module.register_forward_pre_hook(self.before))
            self.handles.append(module.register_forward_hook(self.after))
            return
        hooks = sys.modules.get("torch.nn.modules.module")
        register = getattr(hooks, "register_module_forward_pre_hook", None)
        if register is not None:
            self.finder = register(self.find)

    def find(self, module, args):
        """Global pre-hook: the first module with parameters called with grad on is the one
        watched; every other module call pays for this hook until then only."""
        try:
            if self.seen is not None or not self.torch.is_grad_enabled():
                return None
            if next(module.parameters(), None) is None:
                return None
            self.drop_finder()
            self.handles.append(module.register_forward_hook(self.after))
            self.before(module, args)
        except Exception:
            pass
        return None

    def before(self, module, args):
        if self.seen is not None:
            return None
        seen = {"module": type(module).__name__}
        self.seen = seen
        try:
            torch = self.torch
            seen["grad_enabled"] = bool(torch.is_grad_enabled())
            autocast = self.autocast_enabled(torch)
            seen["autocast"] = autocast
            if autocast:
                getter = getattr(torch, "get_autocast_dtype", None)
                dtype = getter("cuda") if getter is not None else torch.get_autocast_gpu_dtype()
                seen["autocast_dtype"] = dtype_name(dtype)
            seen.update(parameter_precision(module))
        except Exception:
            pass
        return None

    @classmethod
    def autocast_enabled(cls, torch):
        if cls.autocast_by_device is None:
            try:
                torch.is_autocast_enabled("cuda")
                cls.autocast_by_device = True
            except TypeError:
                cls.autocast_by_device = False
        if cls.autocast_by_device:
            return bool(torch.is_autocast_enabled("cuda"))
        return bool(torch.is_autocast_enabled())

    def after(self, module, args, output):
        if self.seen is None or self.output_read:
            return None
        self.output_read = True
        try:
            dtype = output_dtype(output, TorchTypes.tensor)
            if dtype is not None:
                self.seen["output_dtype"] = dtype
        except Exception:
            pass
        return None

    def drop_finder(self):
        finder, self.finder = self.finder, None
        if finder is not None:
            finder.remove()

    def finish(self):
        """Takes the hooks off; what the forward showed, or None when none ran."""
        try:
            self.drop_finder()
        except Exception:
            pass
        remove_hooks(self.handles)
        self.handles = []
        seen, self.seen = self.seen, None
        return seen


def remove_hooks(handles):
    """Takes hooks off; one that fails to come off (its module gone) leaves the rest to go."""
    for handle in handles:
        try:
            handle.remove()
        except Exception:
            pass


def parameter_precision(module):
    """The floating dtype that holds most of a module's parameters (by element count), the
    device of the first of them, and their bytes (bounded walk)."""
    elements = {}
    nbytes = 0
    device = None
    for count, parameter in enumerate(module.parameters()):
        if count >= MODULE_LIMIT:
            break
        if not parameter.is_floating_point():
            continue
        numel = parameter.nelement()
        name = dtype_name(parameter.dtype)
        elements[name] = elements.get(name, 0) + numel
        nbytes += numel * parameter.element_size()
        if device is None:
            device = str(parameter.device)
    if not elements:
        return {}
    dtype = max(sorted(elements), key=lambda name: elements[name])
    return {"param_dtype": dtype, "param_device": device, "param_bytes": nbytes}


def output_dtype(output, tensor_type):
    """The dtype of the largest floating tensor a forward returned: the tensor itself, or among
    the first items of a tuple, list or dict (a Hugging Face output: its logits, not its
    float32 loss)."""
    if tensor_type is None:
        return None
    if isinstance(output, tensor_type):
        items = (output,)
    elif isinstance(output, dict):
        items = itertools.islice(output.values(), 16)
    elif isinstance(output, (tuple, list)):
        items = output[:16]
    else:
        return None
    largest = None
    for item in items:
        if isinstance(item, tensor_type) and item.is_floating_point() and (
                largest is None or item.nelement() > largest.nelement()):
            largest = item
    return None if largest is None else dtype_name(largest.dtype)


def describe_identity(obj, value, identities, text, compiled_only=False):
    """TL113: whether the value is another object than at the last hit (`fresh`; ids compared,
    as the previous one is alive while its copy is made); an optimizer is named so, with how
    many of its parameters have state (none right after it is made)."""
    compiled = compiled_original(obj) if compiled_only else None
    if compiled_only and compiled is None:
        return  # not what torch.compile returns: nothing to compare
    if compiled is not None:
        # TL203: the function compiled is what is new or not; the wrapper is new at every call
        # of torch.compile. The previous one is still held by the name while the next is made.
        value["kind"] = "compiled"
        obj = compiled
    previous = identities.get(text)
    identities[text] = id(obj)
    if previous is not None:
        value["fresh"] = previous != id(obj)
    kind = type(obj)
    if kind.__module__.startswith("torch.optim") and hasattr(obj, "param_groups"):
        value["kind"] = "optimizer"
        value["len"] = len(getattr(obj, "state", ()))


# --------------------------------------------------------------------------------------------
# Targets: from a finding's line to a statement, its trigger line, the values and code objects
# --------------------------------------------------------------------------------------------

def chain_text(node):
    """Dotted text of a Name/Attribute chain (`self.hidden`), else None: nothing else is safe
    to evaluate (calls and subscripts run user code)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def receiver_text(node):
    """The object a store or method call works on: `d` for `d[k]`, `self.cache` for
    `self.cache[k][j]`, `model` for `model[1]`."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return chain_text(node)


def store_texts(target, out):
    """The names an assignment stores to: each element of a tuple target, the container of
    an item store."""
    if isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            store_texts(element, out)
    elif isinstance(target, ast.Starred):
        store_texts(target.value, out)
    else:
        text = receiver_text(target)
        if text:
            out.append(text)


def is_hook_registration(node):
    """`X.register_forward_hook(...)`, `X.register_hook(...)` and the like."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr.startswith("register_") and node.func.attr.endswith("hook"))


def value_texts(stmt):
    """The side-effect-free expressions to read after the statement ran, decided from its AST:
    assignment targets (containers for item stores), the receiver of `X.append(...)`-style
    calls, of `X.register_*hook(...)` (also when its handle is assigned) and of
    `X.backward(...)`; loop and `with` targets."""
    out = []
    value = getattr(stmt, "value", None)
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and is_hook_registration(value):
        text = receiver_text(value.func.value)  # `h = m.register_forward_hook(f)`: count m's hooks
        if text:
            out.append(text)
    elif isinstance(stmt, ast.Assign):
        for target in stmt.targets:
            store_texts(target, out)
    elif isinstance(stmt, ast.AugAssign):
        store_texts(stmt.target, out)
    elif isinstance(stmt, ast.AnnAssign):
        if stmt.value is not None:
            store_texts(stmt.target, out)
    elif isinstance(stmt, (ast.For, ast.AsyncFor)):
        store_texts(stmt.target, out)
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        for item in stmt.items:
            if item.optional_vars is not None:
                store_texts(item.optional_vars, out)
    elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.decorator_list:
        out.append(stmt.name)  # what the decorators made of it (`@torch.compile`)
    elif isinstance(stmt, ast.Return) and stmt.value is not None:
        text = chain_text(stmt.value)
        if text:
            out.append(text)
    elif isinstance(stmt, ast.Expr):
        call = stmt.value
        if isinstance(call, ast.Await):
            call = call.value
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
            name = call.func.attr
            receiver = receiver_text(call.func.value)
            if name == "backward" and receiver and receiver.split(".")[-1] == "autograd":
                # torch.autograd.backward(x): the tensor is the argument
                receiver = chain_text(call.args[0]) if call.args else None
            if receiver and (name in MUTATORS or name == "backward" or is_hook_registration(call)):
                out.append(receiver)
    unique = []
    for text in out:
        if text not in unique:
            unique.append(text)
    return unique


def statements(tree):
    """Every statement with its nesting depth and the def/class (or module) it belongs to."""
    found = []
    stack = [(tree, 0, tree)]
    while stack:
        node, depth, scope = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                found.append((child, depth, scope))
                inner = child if isinstance(
                    child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else scope
                stack.append((child, depth + 1, inner))
            else:
                stack.append((child, depth, scope))
    return found


def first_line(stmt):
    """A statement's first line: a decorated definition starts at its first decorator."""
    decorators = getattr(stmt, "decorator_list", None)
    return min([stmt.lineno] + [d.lineno for d in decorators]) if decorators else stmt.lineno


def innermost_statement(found, line, column):
    """The innermost statement that contains `line`; on `a; b` lines the one at `column`."""
    best = None
    for stmt, depth, scope in found:
        if first_line(stmt) <= line <= (stmt.end_lineno or stmt.lineno):
            if best is None or depth > best[1]:
                best = (stmt, depth, scope)
            elif depth == best[1] and stmt.lineno == best[0].lineno:
                if best[0].col_offset < stmt.col_offset <= max(column - 1, 0):
                    best = (stmt, depth, scope)
    return best


def header_end(stmt):
    """Last line of the statement's own lines: the header of a compound statement (its body
    runs later and is not part of the hit), else the statement's last line."""
    body = getattr(stmt, "body", None)
    if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
        return max(stmt.lineno, body[0].lineno - 1)
    return max(stmt.lineno, stmt.end_lineno or stmt.lineno)


def code_objects(top):
    """All code objects of the script (nested functions, classes, lambdas, comprehensions)."""
    found = []
    stack = [top]
    while stack:
        code = stack.pop()
        found.append(code)
        stack.extend(const for const in code.co_consts if isinstance(const, types.CodeType))
    return found


def line_starts(code):
    """(bytecode offset, line) of each instruction run of the code object."""
    if hasattr(code, "co_lines"):
        return [(start, line) for start, _, line in code.co_lines() if line is not None]
    import dis
    return list(dis.findlinestarts(code))


def code_lines(code, cache):
    """The lines a code object has bytecode for (cached per code object)."""
    lines = cache.get(id(code))
    if lines is None:
        lines = cache[id(code)] = {line for _, line in line_starts(code)}
    return lines


def body_start(stmt, code):
    """First bytecode offset of a `with` statement's body in `code`: its header line fires again
    when the block exits (from a later offset), which is no new hit."""
    if not isinstance(stmt, (ast.With, ast.AsyncWith)) or not stmt.body:
        return None
    first, last = stmt.body[0].lineno, stmt.end_lineno or stmt.lineno
    offsets = [offset for offset, line in line_starts(code) if first <= line <= last]
    return min(offsets) if offsets else None


def codes_for(scope, line, top, codes, cache):
    """The code objects that run the statement: its def/class (matched by name and first line)
    or the module; failing that, every non-expression code object that has the line."""
    if isinstance(scope, ast.Module):
        candidates = [top]
    else:
        firsts = {scope.lineno}
        firsts.update(decorator.lineno for decorator in scope.decorator_list)
        candidates = [code for code in codes
                      if code.co_name == scope.name and code.co_firstlineno in firsts]
    chosen = [code for code in candidates if line in code_lines(code, cache)]
    if not chosen:
        chosen = [code for code in codes
                  if code.co_name not in EXPRESSION_SCOPES and line in code_lines(code, cache)]
    return chosen


class Target:
    """One watched finding: its trigger line, what to read there, and its hits so far."""

    __slots__ = ("id", "rule", "line", "lo", "hi", "exprs", "want_pinned", "want_allocs",
                 "want_grads", "want_graphs", "anomaly_after", "walk", "reuse", "identities", "n", "done",
                 "pending", "states", "exits", "hits", "precision", "forward", "iteration")

    def __init__(self, ident, rule, stmt, texts):
        self.id = ident
        self.rule = rule
        self.line = stmt.lineno
        # A decorator's call may run after the `def` line: it is still the statement.
        self.lo = first_line(stmt)
        self.hi = header_end(stmt)
        self.exprs = [(text, compile(text, "<torchlint>", "eval", dont_inherit=True))
                      for text in texts]
        self.want_pinned = rule == "TL106"
        self.want_allocs = rule == "TL201"
        self.want_grads = rule == "TL110"  # whether the gradients hold graphs as the line starts
        self.anomaly_after = rule == "TL202"  # the line switches it on: read it afterwards
        self.walk = rule in ("TL108", "TL113")
        # TL113: the object each value held at the last hit, by id, to tell a copy or an
        # optimizer made anew at every hit from one kept (ids only: a reference would keep it).
        self.identities = {} if rule in ("TL113", "TL203") else None
        # TL203: dynamo's count of compiled graphs after each hit.
        self.want_graphs = rule == "TL203"
        # TL107: whether the graph kept by `retain_graph=True` is backpropagated again before
        # the line runs next (a GAN's generator loss through the discriminator's forward).
        self.reuse = RetainedGraphUse() if rule == "TL107" else None
        # TL301: the precision the loop's forward runs in, read by hooks on its module for one
        # forward per hit; `forward` is the callee of the forward call the finding labels
        # (`model`), compiled, or None (then the first module with parameters the loop calls).
        self.precision = rule == "TL301"
        self.forward = None
        # TL301 at a loop header: a hit is one iteration, the header to the header again (or
        # to the first line after the loop), so that the body's forward has run when it is read.
        self.iteration = False
        if self.precision and isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            self.hi = max(self.hi, stmt.end_lineno or stmt.lineno)
            self.iteration = True
        self.hits = 0  # hits wanted; set from the plan (a growth rule may want more)
        self.n = 0
        self.done = False
        self.pending = None
        self.states = []
        self.exits = None  # id(code) -> offset from which the line is a `with` block's exit


class CodeState:
    """The watched targets of one code object, by trigger line, and its pending hits."""

    __slots__ = ("code", "triggers", "pend", "active")

    def __init__(self, code):
        self.code = code
        self.triggers = {}
        self.pend = []
        self.active = 0


def plan_targets(plan_targets_json, source, path, top):
    """Targets the runner can watch (grouped by code object) and the others with a reason."""
    tree = ast.parse(source, path)
    found = statements(tree)
    codes = code_objects(top)
    cache = {}
    nlines = source.count(b"\n") + 1
    armed, unarmed, states = [], [], {}
    for raw in plan_targets_json:
        ident = raw.get("id")
        try:
            line = int(raw.get("line") or 0)
            if not 1 <= line <= nlines:
                unarmed.append({"target": ident, "why": "the script has no line %d" % line})
                continue
            best = innermost_statement(found, line, int(raw.get("column") or 1))
            if best is None:
                unarmed.append({"target": ident, "why": "no statement on line %d" % line})
                continue
            stmt, _, scope = best
            chosen = codes_for(scope, stmt.lineno, top, codes, cache)
            if not chosen:
                why = "line %d runs no bytecode to watch" % stmt.lineno
                unarmed.append({"target": ident, "why": why})
                continue
            target = Target(ident, str(raw.get("code") or ""), stmt, value_texts(stmt))
            target.hits = number(raw.get("hits"), 0)
            if target.rule == STEP_RULE:
                target.exprs = []  # a step boundary reads nothing; it times the snapshots
            if target.precision:
                target.exprs = []  # the loop's targets are batches: its forward is what counts
                target.forward = forward_callee(raw.get("forward"))
        except Exception as exc:
            unarmed.append({"target": ident, "why": describe_failure("cannot map the line", exc)})
            continue
        for code in chosen:
            start = body_start(stmt, code)
            if start is not None:
                if target.exits is None:
                    target.exits = {}
                target.exits[id(code)] = start
            state = states.get(id(code))
            if state is None:
                state = states[id(code)] = CodeState(code)
            state.triggers.setdefault(target.line, []).append(target)
            state.active += 1
            target.states.append(state)
        armed.append(target)
    return armed, unarmed, states


# --------------------------------------------------------------------------------------------
# Hits: shared by both mechanisms
# --------------------------------------------------------------------------------------------

class Pending:
    """A hit whose line is running: observed at the next line event of its frame."""

    __slots__ = ("target", "state", "frame", "n", "last", "t0", "grad", "inference", "anomaly",
                 "grads", "watch")

    def __init__(self, target, state, frame, n):
        self.target = target
        self.state = state
        self.frame = frame
        self.n = n
        self.last = target.line
        self.t0 = 0.0
        self.grad = self.inference = self.anomaly = self.grads = None
        self.watch = None


def on_stack(wanted, frame):
    """Whether `wanted` is `frame` or one of its callers (a pending hit's frame still runs)."""
    while frame is not None:
        if frame is wanted:
            return True
        frame = frame.f_back
    return False


class Probe:
    """Hit bookkeeping: starts hits, observes them once their line has run, emits `hit` and
    `complete`, and switches a code object off once its targets have their hits."""

    def __init__(self, emitter, hits, warmup):
        self.emitter = emitter
        self.hits = max(1, int(hits))
        self.warmup = max(0, int(warmup))
        self.codes = {}  # id(code) -> CodeState
        self.left = 0  # armed targets still short of their hits
        self.backend = None
        self.off = False
        self.completed = False
        self.step_snapshots = 0
        # 3.12's f_locals is a snapshot dict cached on the frame: it would keep last step's
        # tensors alive; cleared after reading (3.13 has a write-through proxy instead).
        self.clear_snapshots = False

    def settle(self, state, frame, line):
        """A line event in a code object with pending hits: observe those whose line has run."""
        for pending in tuple(state.pend):
            if pending.frame is frame:
                target = pending.target
                if line < target.lo or line > target.hi:
                    self.observe(pending)
                elif line == target.line:
                    # The first line again: a new iteration of a one-line statement, or the
                    # call instruction of a multi-line one (then other lines of it ran since).
                    if target.lo == target.hi or pending.last == line or target.iteration:
                        self.observe(pending)
                    else:
                        pending.last = line
                else:
                    pending.last = line
            elif not on_stack(pending.frame, frame):
                self.observe(pending, timed=False)  # its frame ended or is suspended

    def returned(self, state, frame):
        """The frame returns (or unwinds): its pending hits have run."""
        for pending in tuple(state.pend):
            if pending.frame is frame:
                self.observe(pending)

    def hit(self, state, targets, frame):
        """A trigger line starts: count it and read the grad modes now, before it runs."""
        for target in tuple(targets):
            if target.rule == STEP_RULE:
                self.step(target)
                continue
            pending = target.pending
            if pending is not None:
                if pending.frame is frame:
                    continue  # settle() kept it: the same multi-line statement still runs
                self.observe(pending, timed=False)
                if target.done:
                    continue
            if target.exits is not None:
                start = target.exits.get(id(state.code))
                if start is not None and frame.f_lasti >= start:
                    continue  # the `with` block is exiting
            target.n += 1
            pending = Pending(target, state, frame, target.n)
            torch = loaded_torch()
            if torch is not None:
                try:
                    pending.grad = torch.is_grad_enabled()
                    inference = getattr(torch, "is_inference_mode_enabled", None)
                    if inference is not None:
                        pending.inference = inference()
                    if not target.anomaly_after:
                        pending.anomaly = torch.is_anomaly_enabled()
                except Exception as exc:
                    self.emitter.error(describe_failure("reading torch's grad modes", exc))
                if target.want_grads:
                    # Before the line: a gradient that still holds a graph then kept the last
                    # step's graph (and its cycle) until this backward adds to it.
                    try:
                        pending.grads = BUDGET.gradient_graphs()
                    except Exception as exc:
                        self.emitter.error(describe_failure("reading the parameters' gradients", exc))
                if target.precision:
                    self.watch_forward(pending, torch, frame)
            target.pending = pending
            state.pend.append(pending)
            if target.n >= (target.hits or self.hits):
                self.stop_hits(target)
            pending.t0 = perf_counter()

    def step(self, target):
        """The training loop's header runs: a step starts. Snapshots of the allocation stacks
        at the first steps and every tenth after, for the lines whose memory grows per step."""
        target.n += 1
        n = target.n
        if self.step_snapshots >= STEP_SNAPSHOTS or not (n <= 10 or n % 10 == 0):
            return
        torch = loaded_torch()
        if torch is None or not ATTRIBUTION.ready or initialised_cuda(torch) is None:
            return
        self.step_snapshots += 1
        try:
            event = ATTRIBUTION.event(torch, "step")
            event["step"] = n
            self.emitter.emit(event, urgent=False)
        except Exception as exc:
            self.emitter.error(describe_failure("reading the allocation stacks (--attribute)", exc))

    def stop_hits(self, target):
        """The target has its hits: its line no longer starts new ones."""
        target.done = True
        for state in target.states:
            listed = state.triggers.get(target.line)
            if listed and target in listed:
                rest = [other for other in listed if other is not target]
                if rest:
                    state.triggers[target.line] = rest
                else:
                    del state.triggers[target.line]
            state.active -= 1

    def observe(self, pending, timed=True):
        """Emits the `hit` of a line that has run: predicates, values, counters after warm-up.

        `timed` is False when the line's end was not seen (its frame went away unobserved, or
        the script ended): then `seconds` is left out rather than made up."""
        seconds = perf_counter() - pending.t0
        target = pending.target
        state = pending.state
        frame = pending.frame
        pending.frame = None
        if target.pending is pending:
            target.pending = None
        try:
            state.pend.remove(pending)
        except ValueError:
            pass
        event = {"ev": "hit", "t": 0.0, "target": target.id, "n": pending.n}
        if timed:
            event["seconds"] = seconds
        if pending.grad is not None:
            event["grad_enabled"] = pending.grad
        if pending.inference is not None:
            event["inference_mode"] = pending.inference
        if target.anomaly_after:
            torch = loaded_torch()
            if torch is not None:
                try:
                    event["anomaly_enabled"] = torch.is_anomaly_enabled()
                except Exception:
                    pass
        elif pending.anomaly is not None:
            event["anomaly_enabled"] = pending.anomaly
        # Counters on every hit (one-shot lines have nothing but warm-up hits); only the
        # graph walk, the costly part, waits for the warm-up to end.
        measured = pending.n > self.warmup
        try:
            add_hit_counters(event, target.want_pinned, target.want_allocs)
        except Exception as exc:
            self.emitter.error(describe_failure("reading the memory counters", exc))
        if pending.grads is not None:
            event["grads"], event["grads_with_graph"] = pending.grads
        if target.want_graphs:
            graphs = dynamo_graphs()
            if graphs is not None:
                event["graphs"] = graphs
        if pending.watch is not None:
            seen = pending.watch.finish()
            pending.watch = None
            if seen is not None:
                event["forward"] = seen
        if target.exprs and frame is not None:
            event["values"] = self.read_values(target, frame, measured)
            if target.reuse is not None and measured:
                target.reuse.observe(event, target.exprs[0][1], frame)
        frame = None
        event["t"] = wall_clock()
        wanted = target.hits or self.hits
        last = pending.n >= wanted and self.left == 1 and not self.completed
        if last:
            # Before the hit that completes the run: torchlint may stop the script as soon as
            # it has every line's hits, and the budget must be in by then.
            emit_budget(self.emitter, "complete")
        self.emitter.emit(event, urgent=False)
        if pending.n >= wanted:
            self.left -= 1
            if self.left == 0 and not self.completed:
                self.completed = True
                self.emitter.emit({"ev": "complete", "t": wall_clock()})
        if not state.active and not state.pend and self.backend is not None:
            self.backend.disable(state.code)

    def read_values(self, target, frame, deep):
        """Evaluates the precompiled expressions in the frame; any failure reads as `missing`."""
        values = []
        scope = frame.f_globals
        names = frame.f_locals
        try:
            for text, code in target.exprs:
                try:
                    obj = eval(code, scope, names)
                except Exception:
                    values.append({"expr": text, "kind": "missing"})
                    continue
                value = {"expr": text}
                try:
                    value.update(describe(obj, deep, target.walk))
                    if target.identities is not None:
                        describe_identity(obj, value, target.identities, text, target.want_graphs)
                except Exception:
                    value.setdefault("kind", "other")
                obj = None
                values.append(value)
        finally:
            if self.snapshot_unshared(names, scope, frame):
                names.clear()
        return values

    def snapshot_unshared(self, names, scope, frame):
        """Whether `names`, a 3.12 `f_locals` snapshot just read, is held only by the frame and
        the caller: then the caller empties it (nobody kept a locals() result)."""
        return (self.clear_snapshots and names is not scope and type(names) is dict
                and frame.f_code.co_flags & CO_OPTIMIZED and sys.gettrace() is None
                and sys.getrefcount(names) <= 4)  # the frame, the caller, here, the call

    def watch_forward(self, pending, torch, frame):
        """TL301: hooks that read the next forward of the loop's model as this hit runs: on the
        module the finding's forward calls when the frame has it, else on the first module
        with parameters called with grad on. Read once, at the hit's observation."""
        target = pending.target
        module = None
        if target.forward is not None:
            scope = frame.f_globals
            names = frame.f_locals
            try:
                module = eval(target.forward, scope, names)
            except Exception:
                module = None
            finally:
                if self.snapshot_unshared(names, scope, frame):
                    names.clear()
            names = None
        TorchTypes.refresh()
        if module is not None and (TorchTypes.module is None
                                   or not isinstance(module, TorchTypes.module)):
            module = None
        watch = ForwardWatch(torch)
        try:
            watch.arm(module)
        except Exception as exc:
            watch.finish()
            self.emitter.error(describe_failure("hooking the loop's forward (TL301)", exc))
            return
        pending.watch = watch

    def flush(self):
        """Observes every pending hit (the script ended before their next line)."""
        for state in list(self.codes.values()):
            for pending in tuple(state.pend):
                try:
                    self.observe(pending, timed=False)
                except Exception as exc:
                    self.emitter.error(describe_failure("observing a hit at exit", exc))

    def fail(self, exc, where="watching the script"):
        """A runner bug: report it once and let the script go on unwatched."""
        if self.off:
            return
        self.off = True
        for state in self.codes.values():
            del state.pend[:]
        try:
            if self.backend is not None:
                self.backend.stop()
        except Exception:
            pass
        self.emitter.error(describe_failure(where + " failed, the script continues unwatched", exc))


# --------------------------------------------------------------------------------------------
# Mechanisms
# --------------------------------------------------------------------------------------------

class Monitoring:
    """Python 3.12+: LINE and PY_RETURN events on the watched code objects only (PEP 669), and
    PY_UNWIND (global-only; it fires only when an exception leaves a frame) so that a line that
    raised is observed when its frame unwinds.

    Every line of a watched code object calls back (the line after a hit is where its result is
    read), so the callback returns at once when nothing is pending and the line is no trigger."""

    name = "sys.monitoring"

    def __init__(self, probe):
        monitoring = sys.monitoring
        self.monitoring = monitoring
        self.probe = probe
        self.tool = None
        self.armed = []
        for tool in (monitoring.PROFILER_ID, 4, 3, monitoring.OPTIMIZER_ID,
                     monitoring.DEBUGGER_ID, monitoring.COVERAGE_ID):
            try:
                if monitoring.get_tool(tool) is None:
                    monitoring.use_tool_id(tool, "torchlint")
                    self.tool = tool
                    break
            except ValueError:
                continue
        if self.tool is None:
            raise RuntimeError("every sys.monitoring tool id is taken")
        events = monitoring.events
        self.events = events.LINE | events.PY_RETURN
        self.unwind = events.PY_UNWIND
        try:
            monitoring.register_callback(self.tool, events.LINE, self._line_callback())
            monitoring.register_callback(self.tool, events.PY_RETURN, self._return_callback())
            monitoring.register_callback(self.tool, events.PY_UNWIND, self._return_callback())
        except Exception:
            monitoring.free_tool_id(self.tool)
            raise

    def _line_callback(self):
        """The hot path: ~0.1 us for a line that is no trigger while nothing is pending."""
        probe = self.probe
        codes_get = probe.codes.get
        getframe = sys._getframe
        disable = self.monitoring.DISABLE
        last = CodeState(None)  # the state of the code object seen last (one atomic reference)

        def on_line(code, line):
            nonlocal last
            try:
                state = last
                if state.code is not code:
                    state = codes_get(id(code))
                    if state is None:
                        return disable
                    last = state
                if state.pend:
                    frame = getframe(1)
                    probe.settle(state, frame, line)
                    if line in state.triggers:
                        probe.hit(state, state.triggers[line], frame)
                elif line in state.triggers:
                    probe.hit(state, state.triggers[line], getframe(1))
            except Exception as exc:
                probe.fail(exc)
            return None

        return on_line

    def _return_callback(self):
        probe = self.probe
        codes_get = probe.codes.get
        getframe = sys._getframe

        def on_return(code, offset, retval_or_exception):
            try:
                state = codes_get(id(code))
                if state is not None and state.pend:
                    probe.returned(state, getframe(1))
            except Exception as exc:
                probe.fail(exc)
            return None

        return on_return

    def arm(self, code):
        """LINE and PY_RETURN on this code object only."""
        self.monitoring.set_local_events(self.tool, code, self.events)
        self.armed.append(code)

    def start(self):
        """PY_UNWIND cannot be local: it is switched on globally (and off once all is done)."""
        if self.armed:
            self.monitoring.set_events(self.tool, self.unwind)

    def disable(self, code):
        """The code object's targets have their hits: it runs at full speed again."""
        self.monitoring.set_local_events(self.tool, code, 0)
        self.armed[:] = [armed for armed in self.armed if armed is not code]
        if not self.armed:
            self.monitoring.set_events(self.tool, 0)

    def stop(self):
        """Everything off (a runner failure, a forked child, the interpreter's teardown)."""
        for code in self.armed:
            try:
                self.monitoring.set_local_events(self.tool, code, 0)
            except Exception:
                pass
        del self.armed[:]
        try:
            self.monitoring.set_events(self.tool, 0)
        except Exception:
            pass

    stop_in_child = stop


class Settrace:
    """Python 3.8-3.11 (or no free monitoring tool): a global tracer that hands a local tracer
    only to frames of the watched code objects."""

    name = "settrace"

    def __init__(self, probe):
        self.probe = probe
        self.watched = set()
        self.off = False
        self.global_trace = self._global_tracer()

    def _global_tracer(self):
        probe = self.probe
        codes_get = probe.codes.get
        watched = self.watched

        def local_trace(frame, event, arg):
            try:
                state = codes_get(id(frame.f_code))
                if state is None or id(state.code) not in watched:
                    frame.f_trace = None
                    return None
                if event == "line":
                    line = frame.f_lineno
                    if state.pend:
                        probe.settle(state, frame, line)
                    targets = state.triggers.get(line)
                    if targets:
                        probe.hit(state, targets, frame)
                elif event == "return":
                    if state.pend:
                        probe.returned(state, frame)
            except Exception as exc:
                probe.fail(exc)
                frame.f_trace = None
                return None
            return local_trace

        def global_trace(frame, event, arg):
            if id(frame.f_code) in watched:
                return local_trace
            return None

        return global_trace

    def arm(self, code):
        self.watched.add(id(code))

    def start(self):
        """Installed last, right before the script, so that the runner itself is not traced."""
        if self.watched:
            threading.settrace(self.global_trace)
            sys.settrace(self.global_trace)

    def disable(self, code):
        """Frames of this code object are no longer traced; none left: tracing ends."""
        self.watched.discard(id(code))
        if not self.watched:
            self.stop()

    def stop(self):
        """Off for this thread now; other threads' tracers find nothing watched and stop."""
        self.watched.clear()
        if not self.off:
            self.off = True
            threading.settrace(None)
            sys.settrace(None)

    stop_in_child = stop


# --------------------------------------------------------------------------------------------
# Running the script like `python script.py args`
# --------------------------------------------------------------------------------------------

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def is_out_of_memory(exc):
    """torch's OutOfMemoryError, or the RuntimeError older versions raise for a CUDA OOM."""
    if type(exc).__name__ == "OutOfMemoryError":
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc)


class UserCode:
    """Which files are the user's code: not the runner, not the standard library, not an
    installed package. Decided once per file name (allocation stacks repeat them)."""

    roots = None
    known = {}

    @classmethod
    def real_path(cls, path):
        """The file's real path when it is the user's code, else None."""
        if path in cls.known:
            return cls.known[path]
        if cls.roots is None:
            import sysconfig
            roots = set()
            for name in ("stdlib", "platstdlib", "purelib", "platlib"):
                try:
                    roots.add(os.path.realpath(sysconfig.get_paths()[name]))
                except (KeyError, OSError):
                    pass
            cls.roots = roots
        real = None
        if path and not path.startswith("<"):
            candidate = os.path.realpath(path)
            installed = "site-packages" in candidate or "dist-packages" in candidate
            if (not installed and candidate != RUNNER_FILE
                    and not any(candidate.startswith(root + os.sep) for root in cls.roots)):
                real = candidate
        cls.known[path] = real
        return real


def user_frames(tb):
    """(file, line) of the frames in the user's code, innermost first: not the runner's, not
    the standard library's, not an installed package's."""
    frames = []
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_globals is not RUNNER_GLOBALS:
            real = UserCode.real_path(frame.f_code.co_filename)
            if real is not None:
                frames.append((real, tb.tb_lineno))
        tb = tb.tb_next
    frames.reverse()
    return frames


def out_of_memory_event(exc):
    """What an out-of-memory error leaves to read, taken before its frames unwind: the line
    that asked, how much (from the message), and the allocator and device at that moment."""
    import re
    message = str(exc)
    event = {"ev": "out_of_memory", "t": wall_clock(), "message": message.split("\n")[0][:500]}
    frames = user_frames(exc.__traceback__)
    event["stack"] = [{"file": path, "line": line} for path, line in frames[:20]]
    asked = re.search(r"Tried to allocate ([0-9.]+) ?(B|KiB|MiB|GiB|TiB)", message)
    if asked:
        event["requested"] = int(float(asked.group(1)) * UNITS[asked.group(2)])
    # A cap the script set (`set_per_process_memory_fraction`): the limit it hit, not the card.
    allowed = re.search(r"([0-9.]+) ?(B|KiB|MiB|GiB|TiB) allowed", message)
    if allowed:
        event["allowed"] = int(float(allowed.group(1)) * UNITS[allowed.group(2)])
    torch = loaded_torch()
    cuda = initialised_cuda(torch) if torch is not None else None
    if cuda is not None:
        try:
            index = cuda.current_device()
            stats = AllocatorStats.device(torch, cuda, index)
            event["allocated"] = pick(stats, "allocated_bytes", "all", "current")
            event["reserved"] = pick(stats, "reserved_bytes", "all", "current")
            free, total = cuda.mem_get_info(index)
            event["device_free"], event["device_total"] = int(free), int(total)
            event["largest_free_block"] = largest_free_block(torch)
        except Exception:
            pass  # what was read so far still tells the story
    return event


def largest_free_block(torch):
    """The largest block the allocator holds free: a request above it needs a new segment,
    whatever the cache holds in all. Read from the allocator's snapshot (its segments and
    blocks; no stacks needed)."""
    largest = 0
    for segment in torch.cuda.memory._snapshot().get("segments", ()):
        for block in segment.get("blocks", ()):
            if block.get("state") == "inactive":
                largest = max(largest, int(block.get("size", 0)))
    return largest


class Outcome:
    """How the script ended, for the `exit` event (emitted last, from atexit)."""

    status = 0
    traceback = None
    interrupted = False


def strip_runner_frames(tb):
    """The traceback without the runner's own frames (rebuilt; Python 3.7+ allows it)."""
    entries = []
    while tb is not None:
        if tb.tb_frame.f_globals is not RUNNER_GLOBALS:
            entries.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for entry in reversed(entries):
        rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return rebuilt


def exit_status(code):
    """SystemExit semantics: None is 0, an int is itself (as C's int), anything else is printed
    to stderr and gives 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        if -(1 << 63) <= code < (1 << 63):
            return ((code & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000
        return 1
    try:
        sys.stderr.write(str(code) + "\n")
        sys.stderr.flush()
    except Exception:
        pass
    return 1


def report_exception(exc):
    """Prints an uncaught exception as Python would (through sys.excepthook) and returns the
    formatted traceback, both without runner frames."""
    import traceback
    tb = strip_runner_frames(exc.__traceback__)
    exc.__traceback__ = tb
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, tb
    if PY >= (3, 12):
        sys.last_exc = exc
    try:
        sys.excepthook(type(exc), exc, tb)
    except Exception:
        sys.stderr.write(text)
    try:
        sys.stderr.flush()
    except Exception:
        pass
    return text


def main_module(path):
    """A fresh `__main__` as `python script.py` makes it (multiprocessing spawn finds the script
    through `__file__`, pickle finds its classes through sys.modules)."""
    module = types.ModuleType("__main__")
    module.__file__ = path
    module.__builtins__ = builtins
    module.__spec__ = None
    module.__package__ = None
    module.__cached__ = None
    try:
        from importlib.machinery import SourceFileLoader
        module.__loader__ = SourceFileLoader("__main__", path)
    except Exception:
        pass
    return module


def number(value, default):
    """An integer from the plan, or the default when it is not one."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def installed_torch_version():
    """torch's version, without importing it (the script may never do so)."""
    module = sys.modules.get("torch")
    if module is not None:
        return getattr(module, "__version__", None)
    try:
        from importlib import metadata
        return metadata.version("torch")
    except Exception:
        return None


def choose_backend(probe, armed, unarmed):
    """Monitoring where it exists, else settrace; arms the watched code objects. Returns the
    mechanism's name and the targets still armed."""
    failures = []
    kinds = (Monitoring, Settrace) if hasattr(sys, "monitoring") else (Settrace,)
    for kind in kinds:
        try:
            backend = kind(probe)
            for state in probe.codes.values():
                backend.arm(state.code)
        except Exception as exc:
            failures.append(describe_failure("cannot use " + kind.name, exc))
            continue
        probe.backend = backend
        probe.clear_snapshots = kind is Monitoring and PY == (3, 12)
        return backend.name, armed
    for message in failures:
        probe.emitter.error(message)
    unarmed.extend({"target": target.id, "why": "no tracing mechanism"} for target in armed)
    probe.codes = {}
    return "none", []


def events_fd(plan):
    """Where events go: the pipe torchlint passed, or, in a rank of a distributed job (whose
    launcher passes no descriptors on), a connection of its own to torchlint's socket."""
    path = plan.get("events_socket")
    if not path:
        return plan.get("events_fd")
    try:
        import socket
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(path)
        return conn.detach()
    except OSError:
        return -1  # nobody listens: the script runs unwatched


def env_int(name):
    """An integer the launcher set in the environment (RANK, WORLD_SIZE), else None."""
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def run(plan):
    """Loads the plan, prepares the watch, runs the script and returns its exit status."""
    emitter = Emitter(events_fd(plan))
    probe = Probe(emitter, number(plan.get("hits"), 1), number(plan.get("warmup"), 0))
    READ_DEVICE[0] = bool(plan.get("read_device"))
    outcome = Outcome()
    path = os.path.abspath(str(plan.get("script") or ""))
    targets_json = [t for t in (plan.get("targets") or []) if isinstance(t, dict)]

    # The runner's folder leaves sys.path; the script's (symlinks resolved) takes its place.
    runner_dir = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [entry for entry in sys.path
                   if not entry or os.path.abspath(entry) != runner_dir]
    sys.path.insert(0, os.path.dirname(os.path.realpath(path)))
    sys.argv = [str(arg) for arg in (plan.get("argv") or [path])]

    def emit_start(mechanism, armed, unarmed):
        emitter.emit({
            "ev": "start",
            "t": wall_clock(),
            "pid": os.getpid(),
            "python": sys.version.split()[0],
            "torch": installed_torch_version(),
            "mechanism": mechanism,
            "armed": [target.id for target in armed if target.rule != STEP_RULE],
            "unarmed": unarmed,
            "rank": env_int("RANK"),
            "world_size": env_int("WORLD_SIZE"),
            "local_world_size": env_int("LOCAL_WORLD_SIZE"),
        })

    def cannot_run(status, message, why, traceback_text=None):
        """The script cannot start (unreadable, does not compile): Python's message and status,
        and a `start` first so that torchlint reports the script's failure, not the runner's."""
        sys.stderr.write(message)
        emit_start("none", [], [{"target": t.get("id"), "why": why} for t in targets_json])
        event = {"ev": "exit", "t": wall_clock(), "status": status}
        if traceback_text is not None:
            event["traceback"] = traceback_text
        emitter.emit(event, last=True)
        return status

    try:
        with open(path, "rb") as handle:
            source = handle.read()
    except OSError as exc:
        program = os.path.basename(sys.executable) or "python"
        return cannot_run(2, "%s: can't open file %r: [Errno %s] %s\n"
                          % (program, path, exc.errno, exc.strerror), "the script cannot be read")
    try:
        code = compile(source, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        import traceback
        text = "".join(traceback.format_exception_only(type(exc), exc))
        return cannot_run(1, text, "the script does not compile", text)

    # What to watch; a failure here leaves the script unwatched, never unrun.
    armed, unarmed, mechanism = [], [], "none"
    try:
        armed, unarmed, probe.codes = plan_targets(targets_json, source, path, code)
        if armed:
            mechanism, armed = choose_backend(probe, armed, unarmed)
    except Exception as exc:
        why = describe_failure("cannot prepare the watch", exc)
        probe.codes, probe.backend, armed = {}, None, []
        unarmed = [{"target": t.get("id"), "why": why} for t in targets_json]
    probe.left = sum(1 for target in armed if target.rule != STEP_RULE)

    sampler = Sampler(emitter)
    fork_warning = ForkWarning(sampler)

    def after_fork_in_child():
        """DataLoader workers and other forks: silent, unwatched, and off the pipe."""
        emitter.close_in_child()
        probe.off = True
        for state in probe.codes.values():
            del state.pend[:]
        if probe.backend is not None:
            try:
                probe.backend.stop_in_child()
            except Exception:
                pass

    try:
        os.register_at_fork(before=fork_warning.before_fork, after_in_child=after_fork_in_child)
    except (AttributeError, RuntimeError) as exc:
        emitter.error(describe_failure("cannot follow forks", exc))
    try:
        sampler.start()
    except RuntimeError as exc:
        emitter.error(describe_failure("cannot start the memory sampler", exc))

    def at_exit():
        """Runs last (registered before the script's own handlers, after non-daemon threads
        ended): flush pending hits, then `exit`; an interrupted script dies of SIGINT."""
        if os.getpid() != emitter.pid:
            return  # a fork of the script that exits through Python: not ours to report
        try:
            probe.flush()
            probe.off = True
            if probe.backend is not None:
                probe.backend.stop()  # nothing is watched during the interpreter's teardown
        except Exception:
            pass
        sampler.halt.set()
        emit_budget(emitter, "exit")
        # A last sample: the run's peaks include what happened since the previous one (an
        # allocation burst that ended in an out-of-memory error takes less than a period).
        try:
            emitter.emit(sample_event())
        except Exception:
            pass
        event = {"ev": "exit", "t": wall_clock(), "status": outcome.status}
        if outcome.traceback is not None:
            event["traceback"] = outcome.traceback
        emitter.emit(event, last=True)
        if outcome.interrupted:
            try:
                import signal
                for stream in (sys.stdout, sys.stderr):
                    try:
                        stream.flush()
                    except Exception:
                        pass
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                os.kill(os.getpid(), signal.SIGINT)
            except Exception:
                pass

    atexit.register(at_exit)

    cap = plan.get("max_memory")
    on_import = [BUDGET.install]
    if plan.get("attribute"):
        on_import.append(lambda torch: ATTRIBUTION.install(emitter, torch))
    if isinstance(cap, int) and cap > 0:
        on_import.append(lambda torch: cap_device_memory(emitter, torch, cap))
    TorchImport(emitter, on_import).install()
    module = main_module(path)
    sys.modules["__main__"] = module
    emit_start(mechanism, armed, unarmed)
    if probe.backend is not None:
        try:
            probe.backend.start()
        except Exception as exc:
            probe.fail(exc, "starting the tracer")
    try:
        exec(code, module.__dict__)
    except SystemExit as exc:
        outcome.status = exit_status(exc.code)
    except KeyboardInterrupt as exc:
        outcome.traceback = report_exception(exc)
        outcome.status = 130
        outcome.interrupted = True
    except BaseException as exc:
        if is_out_of_memory(exc):
            try:
                emitter.emit(out_of_memory_event(exc))
            except Exception as failure:
                emitter.error(describe_failure("reading the out-of-memory error", failure))
            emit_budget(emitter, "out_of_memory")
        outcome.traceback = report_exception(exc)
        outcome.status = 1
    finally:
        if probe.backend is not None and not probe.off:
            try:
                probe.flush()
            except Exception as exc:
                emitter.error(describe_failure("observing the last hits", exc))
    return outcome.status


def main(argv):
    if len(argv) != 2 or argv[0] != "--plan":
        sys.stderr.write("usage: runner.py --plan PLAN.json\n")
        return 2
    try:
        with open(argv[1], "rb") as handle:
            plan = json.loads(handle.read().decode("utf-8"))
        if not isinstance(plan, dict):
            raise ValueError("the plan is not a JSON object")
    except (OSError, ValueError) as exc:
        sys.stderr.write("torchlint runner: cannot read the plan %s: %s\n" % (argv[1], exc))
        return 2
    return run(plan)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
