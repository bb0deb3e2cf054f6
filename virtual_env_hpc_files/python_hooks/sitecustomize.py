"""hpc_files job side: an unchanged Lightning script requeues safely in multi-process DDP.

Put on PYTHONPATH by the job (launchers.sh) only for `-d lightning` jobs that may requeue
(HPC_LIGHTNING_HOOK=no turns it off). Python imports this file at start-up; it does
nothing until Lightning's Trainer module is imported, and then, for every Trainer made:

- turns off Lightning's own SLURM auto-requeue (SLURMEnvironment.auto_requeue): its
  SIGUSR1 handler saves the checkpoint inside the signal handler, which hangs DDP (one
  rank in a collective while another saves; Lightning issue 21406), then requeues the
  job behind the toolkit's back;
- adds hpc_toolkit's SlurmRequeue callback (unless the script has one): on SIGUSR1 or
  SIGTERM every rank sets a flag; at the first batch end where every rank has it (a
  few seconds after the first at most) all ranks agree, save hpc_ckpt_N.ckpt in
  $HPC_CHECKPOINT_DIR together and stop; the job then requeues;
- makes `trainer.fit(...)` without a ckpt_path resume from the newest of those, when
  this attempt resumes its run (HPC_RESUMING=1: its own earlier attempt, a --rerun, or
  --resume); never on a new run's first attempt.

A sitecustomize.py found later on sys.path (a distribution's own) still runs.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
_TRAINER_MODULE = "lightning.pytorch.trainer.trainer"


def _slurm_requeue_class() -> Any:
    try:
        from hpc_toolkit.lightning_requeue import SlurmRequeue
    except ImportError:  # not installed in this venv: the toolkit's own copy (python/)
        sys.path.append(os.path.join(os.path.dirname(os.path.dirname(_HERE)), "python"))
        from hpc_toolkit.lightning_requeue import SlurmRequeue
    return SlurmRequeue


def _patch(module: Any) -> None:
    trainer_cls = module.Trainer
    original_init = trainer_cls.__init__
    original_fit = trainer_cls.fit

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        from lightning.pytorch.plugins.environments import SLURMEnvironment

        env = self._accelerator_connector.cluster_environment
        if isinstance(env, SLURMEnvironment):
            env.auto_requeue = False
        requeue_cls = _slurm_requeue_class()
        if any(isinstance(cb, requeue_cls) for cb in self.callbacks):
            return
        folder = os.environ.get("HPC_CHECKPOINT_DIR") or None
        self.callbacks.append(requeue_cls(dirpath=folder))
        self._hpc_requeue_folder = folder
        if self.is_global_zero:
            print("[hpc] Lightning: its SLURM auto-requeue is off; hpc_toolkit's SlurmRequeue"
                  f" checkpoints at a step boundary on every rank into {folder} (hpc_files)",
                  flush=True)

    def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
        folder = getattr(self, "_hpc_requeue_folder", None)
        # A new run's first attempt never loads a checkpoint (HPC_RESUMING=0): asked here,
        # not only in resume_path, so that an older hpc_toolkit in the venv obeys it too.
        resuming = os.environ.get("HPC_RESUMING") != "0"
        if folder and resuming and len(args) < 4 and kwargs.get("ckpt_path") is None:
            resume = _slurm_requeue_class().resume_path(folder)
            if resume:
                kwargs["ckpt_path"] = resume
                if self.is_global_zero:
                    print(f"[hpc] Lightning: resuming from {resume}", flush=True)
        return original_fit(self, *args, **kwargs)

    trainer_cls.__init__ = __init__
    trainer_cls.fit = fit


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        try:
            _patch(module)
        except Exception as exc:  # never break the user's program
            print(f"[hpc] Lightning hook not applied: {exc!r}", file=sys.stderr, flush=True)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != _TRAINER_MODULE:
            return None
        sys.meta_path.remove(self)  # once
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader)
        return spec


def _run_next_sitecustomize() -> None:
    paths = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", paths)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


if os.environ.get("HPC_LIGHTNING_HOOK", "yes") != "no":
    sys.meta_path.insert(0, _Finder())
_run_next_sitecustomize()
