"""Hydra launcher plugin of hpc_files: `python train.py -m hydra/launcher=hpc_files ...`
submits the sweep as one job array through hpc_files/job_submitter.sh (its requeue,
staging, logs and `hpc status`), one line per point of the sweep. docs/recipes.md: Hydra."""
