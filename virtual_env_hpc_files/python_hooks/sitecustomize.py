"""hpc_files job side: unchanged programs form the job's one world, and requeue safely.

Put on PYTHONPATH by the job for every launcher (project_writes.sh: what the task writes
into the project, hpc_project_writes.py); what follows is for the distributed launchers
only (lightning, script, torchrun; HPC_LIGHTNING_HOOK=no turns it off). Python imports
this file at start-up; it does nothing until one of the modules below is imported:

- torch.distributed: `init_process_group` given a world size (its argument, or WORLD_SIZE)
  that is not the job's (HPC_NUM_NODES x HPC_DEVICES_PER_NODE) stops the program at once
  with a message (exit 2): its processes would otherwise hang or train as separate runs.
- Lightning's Trainer: `num_nodes` and `devices` left at their defaults become the job's
  (a script with no command line forms one world, not one run per process); set to values
  the job does not have, the program stops at once with a message naming both (exit 2).
- In a `-d lightning` job that may requeue (HPC_LIGHTNING_REQUEUE=yes, launchers.sh), and
  under the default launcher (none: one process, nothing else of this hook), for every
  Trainer made:
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

import importlib.machinery
import importlib.util
import os
import sys

# (typing and importlib.abc only where they are needed: every Python process of every task
# imports this file, and they were most of its start-up cost: about 12 ms a process)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
_TRAINER_MODULE = "lightning.pytorch.trainer.trainer"
_C10D_MODULE = "torch.distributed.distributed_c10d"


def _slurm_requeue_class() -> Any:
    try:
        from hpc_toolkit.lightning_requeue import SlurmRequeue
    except ImportError:  # not installed in this venv: the toolkit's own copy (python/)
        sys.path.append(os.path.join(os.path.dirname(os.path.dirname(_HERE)), "python"))
        from hpc_toolkit.lightning_requeue import SlurmRequeue
    return SlurmRequeue


def _job_shape() -> tuple[int, int] | None:
    """(nodes, processes per node) of this job, or None outside one."""
    try:
        return int(os.environ["HPC_NUM_NODES"]), int(os.environ["HPC_DEVICES_PER_NODE"])
    except (KeyError, ValueError):
        return None


def _rank() -> str:
    return os.environ.get("RANK") or os.environ.get("SLURM_PROCID") or "0"


def _stop(message: str) -> None:
    """Every rank says it (a rank stopped first may end the others before they print)."""
    print(f"[hpc] rank {_rank()}: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def _device_count(devices: Any) -> int | None:
    """How many processes per node a Trainer's `devices` asks for; None: whatever is there."""
    if isinstance(devices, (list, tuple)):
        return len(devices)
    text = str(devices).strip()
    if text in ("auto", "-1"):
        return None
    if "," in text:
        return len([d for d in text.split(",") if d.strip()])
    try:
        return int(text)
    except ValueError:
        return None


def _trainer_counts(kwargs: dict[str, Any]) -> None:
    """Fill the job's num_nodes/devices into a Trainer's arguments left at their defaults;
    stop on ones the job does not have."""
    shape = _job_shape()
    if shape is None:
        return
    nodes, per_node = shape
    asked_nodes = kwargs.get("num_nodes")
    asked_devices = _device_count(kwargs.get("devices", "auto"))
    wrong = []
    if asked_nodes is not None and int(asked_nodes) != nodes:
        wrong.append(f"num_nodes={asked_nodes}")
    if asked_devices is not None and asked_devices != per_node:
        wrong.append(f"devices={kwargs.get('devices')!r}")
    if wrong:
        _stop(f"Trainer({', '.join(wrong)}) does not fit this job: {nodes} node(s) x {per_node}"
              f" process(es) per node. Its processes would train as separate runs. Leave"
              f" num_nodes and devices out of the Trainer (the job's are used), set them from"
              f" $HPC_NUM_NODES and $HPC_DEVICES_PER_NODE (or --nodes-arg/--devices-arg), or"
              f" submit with -N {asked_nodes or nodes} and --procs-per-node (CPU) or --gpus"
              f" (GPU) {asked_devices or per_node}")
    filled = []
    if asked_nodes is None:
        kwargs["num_nodes"] = nodes
        filled.append(f"num_nodes={nodes}")
    if kwargs.get("devices", "auto") == "auto":
        kwargs["devices"] = per_node
        filled.append(f"devices={per_node}")
    if filled and _rank() == "0":
        print(f"[hpc] Lightning: Trainer({', '.join(filled)}) from the job"
              " (left at their defaults in the script)", flush=True)


def _patch_trainer(module: Any) -> None:
    trainer_cls = module.Trainer
    original_init = trainer_cls.__init__
    original_fit = trainer_cls.fit
    requeue = os.environ.get("HPC_LIGHTNING_REQUEUE") == "yes"

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if os.environ.get("HPC_LAUNCHER") != "none":  # (one process: its own devices)
            _trainer_counts(kwargs)
        original_init(self, *args, **kwargs)
        if not requeue:
            return
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


def _patch_c10d(module: Any) -> None:
    """torch.distributed's package re-exports init_process_group after this module runs,
    so the patched function is the one every caller (Lightning's too) gets."""
    original = module.init_process_group

    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        shape = _job_shape()
        size = kwargs.get("world_size", args[3] if len(args) > 3 else -1)
        source = "world_size"
        if (size is None or int(size) < 0) and os.environ.get("WORLD_SIZE"):
            size, source = os.environ["WORLD_SIZE"], "WORLD_SIZE"
        if shape is not None and size is not None and int(size) > 0:
            nodes, per_node = shape
            if int(size) != nodes * per_node:
                _stop(f"torch.distributed.init_process_group: {source}={size}, but this job"
                      f" runs {nodes * per_node} process(es) ({nodes} node(s) x {per_node}"
                      " per node): they would not form one world (a hang, or separate runs)."
                      " Let init_process_group read the world from the environment"
                      " (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT: -d script and -d torchrun"
                      " set them), or submit with -N and --procs-per-node (CPU) or --gpus (GPU)"
                      f" whose product is {size}")
        return original(*args, **kwargs)

    init_process_group.__wrapped__ = original  # type: ignore[attr-defined]
    init_process_group.__doc__ = original.__doc__
    module.init_process_group = init_process_group


_PATCHES = {_TRAINER_MODULE: _patch_trainer, _C10D_MODULE: _patch_c10d}


def _install_patches(patches: dict[str, Any] | None = None) -> None:
    """The world and Lightning parts (the distributed launchers): a finder that patches
    the modules of PATCHES (default _PATCHES) as they are imported."""
    import importlib.abc

    class _Loader(importlib.abc.Loader):
        def __init__(self, inner: Any, patch: Any) -> None:
            self._inner = inner
            self._patch = patch

        def create_module(self, spec: Any) -> Any:
            return self._inner.create_module(spec)

        def exec_module(self, module: Any) -> None:
            self._inner.exec_module(module)
            try:
                self._patch(module)
            except Exception as exc:  # never break the user's program
                print(f"[hpc] hook not applied to {module.__name__}: {exc!r}", file=sys.stderr,
                      flush=True)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

    class _Finder(importlib.abc.MetaPathFinder):
        def __init__(self) -> None:
            self._left = dict(_PATCHES if patches is None else patches)

        def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
            patch = self._left.pop(name, None)
            if patch is None:
                return None
            if not self._left:
                sys.meta_path.remove(self)  # every module patched once: out of the way
            spec = importlib.util.find_spec(name)  # by the other finders: this one has no entry
            if spec is None or spec.loader is None:
                return None
            spec.loader = _Loader(spec.loader, patch)
            return spec

    sys.meta_path.insert(0, _Finder())


def _run_next_sitecustomize() -> None:
    paths = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", paths)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def _install_project_writes() -> None:
    """Every launcher: what this task writes into the project (hpc_project_writes.py)."""
    if not os.environ.get("HPC_PROJECT_WRITES_DIR"):
        return
    try:
        sys.path.insert(0, _HERE)
        import hpc_project_writes

        hpc_project_writes.install()
    except Exception:  # never break the user's program
        pass
    finally:
        if sys.path and sys.path[0] == _HERE:
            del sys.path[0]


_install_project_writes()
# The world and Lightning parts: the distributed launchers only (every launcher has this
# file on PYTHONPATH for the project-writes hook).
if os.environ.get("HPC_LIGHTNING_HOOK", "yes") != "no" and os.environ.get(
    "HPC_LAUNCHER", "lightning"
) in ("lightning", "script", "torchrun"):
    _install_patches()
elif (
    os.environ.get("HPC_LIGHTNING_HOOK", "yes") != "no"
    and os.environ.get("HPC_LAUNCHER") == "none"
    and os.environ.get("HPC_LIGHTNING_REQUEUE") == "yes"
):
    # A Lightning script under the default launcher (one process): Lightning's own SLURM
    # auto-requeue saved hpc_ckpt_N.ckpt into the working folder (the project, shared by
    # every task and run: another run resumed from it) and requeued behind the toolkit's
    # back. The Trainer gets the same requeue as under -d lightning; nothing else changes.
    _install_patches({_TRAINER_MODULE: _patch_trainer})
_run_next_sitecustomize()
