"""Which GPU evaluates a shape: sticky, least-loaded assignment over live GPUs, with failover.

A shape stays on one GPU while it is being searched: its speedups are then all measured on the same chip (clocks,
thermals and the baselines' autotuning choices differ a little between chips of one model), and that GPU's build
and autotune caches stay warm for it. A new shape goes to the GPU with the fewest active shapes; a shape is
active until it has not been evaluated for `idle_s` seconds. When a GPU is lost, its shapes move to the others.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)


class NoLiveGPU(RuntimeError):
    """Every GPU of the campaign is lost."""


@dataclass
class _Slot:
    alive: bool = True
    inflight: int = 0
    lost_reason: str = ""
    shapes: dict = field(default_factory=dict)  # shape -> last use (monotonic)


class ShapeRouter(Generic[K]):
    def __init__(self, keys: list[K], idle_s: float = 900.0, clock=time.monotonic):
        if not keys:
            raise ValueError("a router needs at least one GPU")
        self._slots: dict[K, _Slot] = {k: _Slot() for k in keys}
        self._home: dict[tuple, K] = {}
        self._lock = threading.Condition()
        self.idle_s, self.clock = idle_s, clock
        self.moves: list[tuple[tuple, K, K]] = []  # (shape, from, to) after a loss

    def _active(self, k: K, now: float) -> int:
        s = self._slots[k]
        return sum(1 for t in s.shapes.values() if now - t < self.idle_s)

    def live(self) -> list[K]:
        with self._lock:
            return [k for k, s in self._slots.items() if s.alive]

    def home(self, shape: tuple) -> K | None:
        with self._lock:
            return self._home.get(tuple(shape))

    def acquire(self, shape: tuple, exclude: set | frozenset = frozenset()) -> K:
        """The GPU for this evaluation of `shape` (its home while that is alive and not excluded); counts it in
        flight until release()."""
        shape = tuple(shape)
        with self._lock:
            now = self.clock()
            k = self._home.get(shape)
            if k is None or not self._slots[k].alive or k in exclude:
                live = [c for c, s in self._slots.items() if s.alive and c not in exclude]
                if not live:
                    live = [c for c, s in self._slots.items() if s.alive]
                if not live:
                    raise NoLiveGPU("every GPU of this campaign is lost: " + "; ".join(
                        f"{c}: {s.lost_reason}" for c, s in self._slots.items()))
                new = min(live, key=lambda c: (self._active(c, now), self._slots[c].inflight))
                if k is not None and k != new:
                    self.moves.append((shape, k, new))
                    self._slots[k].shapes.pop(shape, None)
                k = self._home[shape] = new
            slot = self._slots[k]
            slot.shapes[shape] = now
            slot.inflight += 1
            return k

    def release(self, k: K, shape: tuple) -> None:
        with self._lock:
            s = self._slots[k]
            s.inflight = max(0, s.inflight - 1)
            if tuple(shape) in s.shapes:
                s.shapes[tuple(shape)] = self.clock()

    def lost(self, k: K, reason: str) -> None:
        with self._lock:
            s = self._slots[k]
            s.alive, s.lost_reason = False, reason

    def revive(self, k: K) -> None:
        with self._lock:
            self._slots[k].alive, self._slots[k].lost_reason = True, ""

    def add(self, k: K) -> None:
        with self._lock:
            self._slots.setdefault(k, _Slot())

    def load(self) -> dict[K, dict]:
        with self._lock:
            now = self.clock()
            return {k: {"alive": s.alive, "inflight": s.inflight, "active_shapes": self._active(k, now),
                        "lost_reason": s.lost_reason} for k, s in self._slots.items()}
