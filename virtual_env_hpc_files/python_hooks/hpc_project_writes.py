"""hpc_files job side: which paths of the project folder this task's Python processes write.

Installed by sitecustomize.py when HPC_PROJECT_WRITES_DIR is set (project_writes.sh, every
launcher): an audit hook (sys.addaudithook) sees every open for writing, mkdir, rename,
remove and link of this process, and torch.save's own file writer (which opens its file in
C++, unseen by the audit hook). Each path under the project ($HPC_SOURCE_DIR), relative to
it (a folder made ends in /), goes once per process to
$HPC_PROJECT_WRITES_DIR/<task>/<node>.<pid>: only what this
task wrote, at any depth, with nothing of the project read. The job side names them in the
log and finds the paths two tasks of one submission both wrote (project_writes.sh, and
`hpc status`). Never breaks the program: any error here is swallowed.
"""

from __future__ import annotations

import os
import sys

# (no typing, socket or importlib.abc at start-up: every Python process of every task loads
# this file)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# Made beside the code by Python and tools on their own: not the program's outputs.
_SKIP_PARTS = ("__pycache__", ".git", ".ipynb_checkpoints", ".pytest_cache", ".mypy_cache")
_EVENTS_DST = {"os.rename": 1, "os.symlink": 1, "os.link": 1}  # event: index of the target
_EVENTS_PATH = ("os.mkdir", "os.remove", "os.rmdir", "os.truncate")


class _Recorder:
    def __init__(self, root: str, folder: str) -> None:
        self.root = root.rstrip("/") + "/"
        self.folder = folder
        self.seen: set[str] = set()
        self.out: Any = None
        self.out_pid = 0
        self.busy = False

    def note(self, path: Any, folder: bool = False) -> None:
        """Record PATH when it is in the project (a folder made: with a trailing /)."""
        if self.busy or isinstance(path, int) or path is None:
            return
        self.busy = True  # (the log file's own open comes back here)
        try:
            p = os.fsdecode(os.fspath(path))
            if not os.path.isabs(p):
                p = os.path.join(os.getcwd(), p)
            p = os.path.normpath(p)
            if not p.startswith(self.root):
                real = os.path.realpath(p)
                if not real.startswith(self.root):
                    return
                p = real
            if folder and os.path.isdir(p):
                return  # (os.makedirs(..., exist_ok=True) on a folder already there)
            rel = p[len(self.root) :] + ("/" if folder else "")
            if not rel or rel in self.seen or any(part in _SKIP_PARTS for part in rel.split("/")):
                return
            if rel.endswith(".pyc") or ".egg-info" in rel:
                return
            self.seen.add(rel)
            if self.out is None or self.out_pid != os.getpid():
                os.makedirs(self.folder, exist_ok=True)
                name = f"{os.environ.get('SLURMD_NODENAME') or os.uname().nodename}.{os.getpid()}"
                self.out = open(os.path.join(self.folder, name), "a", encoding="utf-8")  # noqa: SIM115
                self.out_pid = os.getpid()
            self.out.write(rel.replace("\n", "?") + "\n")
            self.out.flush()
        except Exception:  # never the program's problem
            pass
        finally:
            self.busy = False

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, mode, flags = (args + (None, None, None))[:3]
            if isinstance(mode, str):
                if any(c in mode for c in "wax+"):
                    self.note(path)
            elif isinstance(flags, int) and flags & _WRITE_FLAGS:
                self.note(path)
        elif event in _EVENTS_PATH:
            self.note(args[0] if args else None, folder=event == "os.mkdir")
        elif event in _EVENTS_DST:
            self.note(args[_EVENTS_DST[event]] if len(args) > 1 else None)


def _patch_torch_save(recorder: _Recorder) -> None:
    """torch.save(obj, "path") opens the file in C++: note the path as it is handed over."""

    # (a finder needs only find_spec: importlib.abc is imported when torch is)
    class Finder:
        def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
            if name != "torch.serialization":
                return None
            sys.meta_path.remove(self)
            import importlib.abc
            import importlib.util

            spec = importlib.util.find_spec(name)
            if spec is None or spec.loader is None:
                return spec
            inner = spec.loader

            class Loader(importlib.abc.Loader):
                def create_module(self, s: Any) -> Any:
                    return inner.create_module(s)

                def exec_module(self, module: Any) -> None:
                    inner.exec_module(module)
                    try:
                        cls = module._open_zipfile_writer_file
                        init = cls.__init__

                        def wrapped(self_: Any, name: Any, *a: Any, **k: Any) -> None:
                            recorder.note(name)
                            init(self_, name, *a, **k)

                        cls.__init__ = wrapped
                    except Exception:
                        pass

            spec.loader = Loader()
            return spec

    sys.meta_path.insert(0, Finder())


def install() -> None:
    folder = os.environ.get("HPC_PROJECT_WRITES_DIR", "")
    root = os.environ.get("HPC_SOURCE_DIR", "")
    task = os.environ.get("HPC_TASK_INDEX", "0")
    if not folder or not root or not task.isdigit():
        return
    try:
        root = os.path.realpath(root)
    except OSError:
        return
    recorder = _Recorder(root, os.path.join(folder, task))
    sys.addaudithook(recorder.audit)
    if "torch.serialization" not in sys.modules:
        _patch_torch_save(recorder)
