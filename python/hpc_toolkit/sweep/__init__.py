"""Weights & Biases sweeps on Slurm: online agents as job arrays, and offline sweeps.

Offline sweeps run a W&B sweep file with no W&B server: array task i runs point i of the
sweep, with exactly what `wandb agent` would give its run. One module per concern:

- spec: read and check a sweep file (PyYAML only; fast enough for submission)
- grid: the points of a grid sweep, in the order W&B's `sweeps` package gives them
- search: the parameters of a point (grid here; random and bayes through `sweeps`)
- command: the run's command line and environment, built like `wandb agent` builds them
- ledger: the locked, append-only record of every run of an offline sweep
- folder: the sweep's folder on scratch (sweep.json, ledger, the offline W&B runs)
- records: what an offline W&B run file (.wandb) holds: config, sweep id, summary
- stage: submission side (called by hpc_files/lib/sweep.sh)
- agent: job side (called by virtual_env_hpc_files/sweep_agent.sh)
- cli: `hpc sweep count|status|sync`

This package file imports nothing, so `python -m hpc_toolkit.sweep.stage` stays light.
"""
