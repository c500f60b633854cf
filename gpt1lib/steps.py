"""Fine-tuning updates that keep a GPU busy: the whole update replayed as one CUDA graph.

A fine-tuning step of 32 short sequences is launch-bound on a GPU (about 650 kernels).
``GraphedSteps`` captures the whole update (forward, L3, backward, the clip, fused AdamW) once
per batch shape and replays it: one launch a step. Training batches come in few shapes (every
one full, its length rounded up on CUDA: ``runtime.pad_multiple``); each shape's batch is
copied into buffers its graph reads, the learning rate is a tensor the graph reads
(``optim.make_optimizer(..., graphs=True)``), and the LM loss scores every row, padding with
weight 0 (``loss.fused_lm_loss``: the same loss).

The first update of each shape runs eagerly, a real update that creates the optimiser's state
and the kernels' workspaces (a capture must not allocate them); the second captures and
replays. Left eager: a shape whose capture fails (said, and kept in ``failed``), batches over
``MAX_TOKENS`` tokens (compute-bound: a graph saves little), and what the caller keeps out
(micro-batches after an out-of-memory, float16 loss scaling, ``compile=True``, the LSTM).

``seeded_build`` copies the last model built from the same seed instead of drawing its
parameters again: the same parameters, and the random generator left where building it left it.
"""

from __future__ import annotations

import copy
import gc
from collections.abc import Callable

import torch

from .fast import FastGPT
from .optim import set_lr
from .runtime import seed_everything
from .transforms import Batch

#: The largest batch, in tokens, replayed as a graph: 32 sequences of 512.
MAX_TOKENS = 32 * 512
#: A shape met once: its next update is captured.
CAPTURE_NEXT = "capture next"


def cuda_graph(fn: Callable[[], torch.Tensor], pool):
    """Capture ``fn`` as a CUDA graph in memory ``pool`` (None: a new one); nothing runs yet.
    As ``torch.cuda.graph`` does, without its synchronisation, garbage collection and emptied
    cache before each capture, but with Python's garbage collector paused (a graph it destroyed
    mid-capture would break the capture)."""
    graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    collecting = gc.isenabled()
    gc.disable()
    try:
        with torch.cuda.stream(stream):
            graph.capture_begin(pool=pool)
            try:
                out = fn()
            finally:
                graph.capture_end()
    finally:
        if collecting:
            gc.enable()
    torch.cuda.current_stream().wait_stream(stream)

    def replay() -> torch.Tensor:
        graph.replay()
        return out

    return replay, graph.pool()


def random_ok(device: torch.device) -> bool:
    """Whether ``device``'s random generator still draws (a capture that failed halfway can
    leave it marked as capturing)."""
    if device.type != "cuda":
        return True
    try:
        with torch.random.fork_rng(devices=[device]):  # the draw leaves no trace
            torch.rand(1, device=device)
    except RuntimeError:
        return False
    return True


def eager_stand_in(fn: Callable[[], torch.Tensor], pool):
    """``capture`` without CUDA (the tests): each "replay" runs ``fn`` on the same buffers."""
    return fn, pool


def graphs_asked(cfg) -> bool:
    """Whether a fine-tuning protocol replays its updates where it can (``graphs_pay``)."""
    return cfg.graphs and not cfg.compile


def graphs_pay(device: torch.device, model: torch.nn.Module, cfg, precision) -> bool:
    """Whether a fine-tuning run replays its updates as graphs: on CUDA, ``graphs_asked``, no
    float16 loss scaling (its skipped steps wait for the GPU), and a transformer."""
    eager = precision.loss_scaling or not graphs_asked(cfg)
    return device.type == "cuda" and not eager and isinstance(model.transformer, FastGPT)


class GraphedSteps:
    """Updates of ``model`` by ``opt``, replayed per batch shape: ``step(batch, lr)`` returns
    the update's (3,) losses (L3, L2, L1 on the device), or None where the caller takes the
    update eagerly. ``losses(batch)`` is the update's forward. ``capture(fn, pool) -> (replay,
    pool)``: ``cuda_graph``, or ``eager_stand_in`` where there is no CUDA."""

    def __init__(
        self,
        model: torch.nn.Module,
        opt: torch.optim.Optimizer,
        losses: Callable[[Batch], torch.Tensor],
        grad_clip: float,
        capture: Callable | None = None,
    ) -> None:
        self.model, self.opt, self.losses, self.grad_clip = model, opt, losses, grad_clip
        self.device, self.pool = next(model.parameters()).device, None
        self.capture = capture or cuda_graph
        # each batch shape: met once (CAPTURE_NEXT: its next batch is captured), eager (None:
        # too large, or its capture failed), or (replay, buffers)
        self.graphs: dict[tuple, tuple | str | None] = {}
        self.failed: list[str] = []
        self.replays = 0

    def step(self, batch: Batch, lr: float) -> torch.Tensor | None:
        key = (*batch.ids.shape, batch.labels.dtype, batch.n_seq)
        graph = self._graph(key, batch)
        if graph is None:
            return None
        replay, buffers = graph
        self._load(buffers, batch)
        set_lr(self.opt, lr)
        out = replay()
        self.opt.zero_grad(set_to_none=True)  # the graph's gradients are its own
        self.replays += 1
        return out

    def _graph(self, key: tuple, batch: Batch) -> tuple | None:
        """``batch``'s shape's (replay, buffers), its update captured at its second batch; None
        where this batch runs eagerly."""
        if key not in self.graphs:  # the first of its shape: eager, and capture the next
            self.graphs[key] = None if batch.ids.numel() > MAX_TOKENS else CAPTURE_NEXT
        elif self.graphs[key] == CAPTURE_NEXT:
            buffers = batch.to(self.device)
            try:  # out of memory too: this shape stays eager, if it can
                replay, self.pool = self.capture(lambda: self._update(buffers), self.pool)
                self.graphs[key] = (replay, buffers)
            except RuntimeError as e:
                reason = f"batch {tuple(key[:2])}: {type(e).__name__}: {str(e).splitlines()[0]}"
                if not random_ok(self.device):
                    raise RuntimeError(
                        f"CUDA graph capture failed ({reason}) and left PyTorch's CUDA random "
                        "generator unusable in this process (its next dropout mask fails): run "
                        "again with FinetuneConfig(graphs=False), and report the reason"
                    ) from e
                print(f"CUDA graph capture failed, eager for this shape ({reason})")
                self.failed.append(reason)
                self.graphs[key] = None
            self.opt.zero_grad(set_to_none=True)  # a capture's gradients, made or failed: its own
            return self.graphs[key]
        return self.graphs[key] if isinstance(self.graphs[key], tuple) else None

    @staticmethod
    def _load(buffers: Batch, batch: Batch) -> None:
        """Copy ``batch`` into the buffers its shape's graph reads."""
        for name in ("ids", "extract", "mask", "labels"):  # labels too: a shape's key holds them
            getattr(buffers, name).copy_(getattr(batch, name), non_blocking=True)

    def close(self) -> None:
        """Free the graphs and their memory now, not when a garbage collection finds them (they
        and the update's loss function refer to each other)."""
        self.graphs.clear()
        self.losses = None

    def _update(self, buffers: Batch) -> torch.Tensor:
        """The whole update on ``buffers``, as a graph holds it: the gradients written, not
        added to, then clipped and stepped."""
        self.opt.zero_grad(set_to_none=True)
        out = self.losses(buffers)
        out[0].backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        self.opt.step()
        return out.detach()


#: The last model ``seeded_build`` built, by (maker, argument, seed), and torch's generator after.
_BUILT: dict[tuple, tuple[torch.nn.Module, torch.Tensor]] = {}


def seeded_build(make: Callable, arg, seed: int) -> torch.nn.Module:
    """``make(arg)`` right after ``seed_everything(seed)``, torch's generator left where building
    it left it: a copy of the last one built the same way, where there is one (a plan builds
    dozens from one seed)."""
    key = (make, arg, seed)
    seed_everything(seed)
    if key not in _BUILT:
        _BUILT.clear()  # one kept: the memory of one model
        _BUILT[key] = (make(arg), torch.get_rng_state())
    torch.set_rng_state(_BUILT[key][1])
    return copy.deepcopy(_BUILT[key][0])
