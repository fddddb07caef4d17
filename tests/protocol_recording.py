"""What the study's protocol (spec.STUDY_PROTOCOL_TASK) does between its clock reads, for the
PyTorch and TensorFlow backends' tests: each read of its own clock (STUDY_CLOCK), each batch
sliced from the epoch, and each call of the framework's gradient line, in order."""

from __future__ import annotations

import time


def harness_clock() -> float:
    """The harness's clock, handed to the protocol's run: it must never be read."""
    raise AssertionError("the study's protocol reads the study's clock")


def record_protocol(monkeypatch, backend, owner, call: str) -> list[str]:
    """Patch `backend`'s STUDY_CLOCK and epoch_slicer, and `owner.call` (the gradient line),
    to log "clock", "slice" and `call`; returns the list they append to."""
    events: list[str] = []
    slicer, original = backend.epoch_slicer, getattr(owner, call)

    def clock():
        events.append("clock")
        return time.perf_counter()

    def logged_slicer(batches):
        batch = slicer(batches)
        return lambda i: events.append("slice") or batch(i)

    def logged_call(self, *args, **kwargs):
        events.append(call)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(backend, "STUDY_CLOCK", clock)
    monkeypatch.setattr(backend, "epoch_slicer", logged_slicer)
    monkeypatch.setattr(owner, call, logged_call)
    return events
