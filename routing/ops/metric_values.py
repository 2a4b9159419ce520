"""The value behind every metric in multiprocess mode: prometheus_client's own file format, a cheaper write.

prometheus_client's multiprocess value takes a lock, calls ``os.getpid()`` to notice a fork, looks the metric's
key up in the file's index and packs the value through two Python functions on every increment: about six Python
calls and a system call, and a request makes seventeen increments. This value keeps the offset of its slot in
the memory-mapped file and writes the 16 bytes there in one slice assignment (atomic, as prometheus_client's own
write is, so a concurrent scrape never reads half a value), and learns of a fork once, from
``os.register_at_fork``, instead of asking on every call.

The files are the ones prometheus_client writes and reads (``<type>_<pid>.db`` in ``PROMETHEUS_MULTIPROC_DIR``,
keys from ``mmap_key``), so its ``MultiProcessCollector`` sums them at ``/metrics`` as before and
``mark_process_dead`` still applies. It relies on two attributes of ``MmapedDict`` (the slot index and the map),
with prometheus_client pinned in pyproject.toml; tests/ops/test_metric_values.py reads the files back through
prometheus_client to hold it to that.
"""

from __future__ import annotations

import os
import struct
import threading
from typing import Any

from prometheus_client import values
from prometheus_client.mmap_dict import MmapedDict, mmap_key

_PACK = struct.Struct(b"dd").pack
_SLOT = 16  # two doubles: the value and its timestamp


class _Files:
    """The process's open metric files, its pid, and every value living in them (to move them after a fork)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.files: dict[str, MmapedDict] = {}
        self.values: list[SlotValue] = []

    def file(self, prefix: str) -> MmapedDict:
        found = self.files.get(prefix)
        if found is None:
            directory = os.environ["PROMETHEUS_MULTIPROC_DIR"]
            found = self.files[prefix] = MmapedDict(os.path.join(directory, f"{prefix}_{self.pid}.db"))
        return found

    def after_fork_in_child(self) -> None:
        # The parent's files are its own: the child starts files of its pid, each value from what its file holds
        # (zero), as prometheus_client's own value does when it notices the pid changed.
        self.pid = os.getpid()
        self.lock = threading.Lock()  # a thread of the parent may have held the old one at the fork
        for found in self.files.values():
            found.close()
        self.files.clear()
        for value in self.values:
            value.place()


_FILES = _Files()


class SlotValue:
    """A float in a slot of a per-process memory-mapped file, written in place."""

    _multiprocess = True
    __slots__ = ("_params", "_file", "_start", "_end", "_value", "_timestamp")

    def __init__(self, typ: str, metric_name: str, name: str, labelnames: Any, labelvalues: Any, help_text: str,
                 multiprocess_mode: str = "", **kwargs: Any) -> None:
        self._params = typ, metric_name, name, labelnames, labelvalues, help_text, multiprocess_mode
        with _FILES.lock:
            self.place()
            _FILES.values.append(self)

    def place(self) -> None:
        typ, metric_name, name, labelnames, labelvalues, help_text, multiprocess_mode = self._params
        prefix = f"{typ}_{multiprocess_mode}" if typ == "gauge" else typ
        self._file = _FILES.file(prefix)
        key = mmap_key(metric_name, name, labelnames, labelvalues, help_text)
        self._value, self._timestamp = self._file.read_value(key)  # adds the slot when the file lacks it
        self._start = self._file._positions[key]
        self._end = self._start + _SLOT

    def inc(self, amount: float) -> None:
        with _FILES.lock:
            self._value += amount
            self._timestamp = 0.0
            # The map is looked up on each write: MmapedDict replaces it when the file grows.
            self._file._m[self._start:self._end] = _PACK(self._value, 0.0)

    def inc_with(self, amount: float, other: SlotValue, other_amount: float) -> None:
        """``self.inc(amount)`` and ``other.inc(other_amount)`` under one taking of the lock (a histogram's sum
        and bucket)."""
        with _FILES.lock:
            self._value += amount
            self._timestamp = 0.0
            self._file._m[self._start:self._end] = _PACK(self._value, 0.0)
            other._value += other_amount
            other._timestamp = 0.0
            other._file._m[other._start:other._end] = _PACK(other._value, 0.0)

    def set(self, value: float, timestamp: float | None = None) -> None:
        with _FILES.lock:
            self._value = value
            self._timestamp = timestamp or 0.0
            self._file._m[self._start:self._end] = _PACK(value, self._timestamp)

    def set_exemplar(self, exemplar: Any) -> None:
        return  # prometheus_client keeps no exemplars in multiprocess mode either

    def get(self) -> float:
        with _FILES.lock:
            return self._value

    def get_exemplar(self) -> None:
        return None


_installed = False


def install() -> None:
    """Make every metric constructed from now on use ``SlotValue``, when multiprocess mode is on (the
    environment names ``PROMETHEUS_MULTIPROC_DIR``, as prometheus_client itself decides). Idempotent."""
    global _installed
    if _installed or not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return
    values.ValueClass = SlotValue  # read by prometheus_client's metrics as each child is constructed
    os.register_at_fork(after_in_child=_FILES.after_fork_in_child)
    _installed = True
