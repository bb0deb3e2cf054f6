"""JAX multi-process as its docs write it: jax.distributed.initialize() with no arguments."""

import jax
import jax.numpy as jnp
from jax.experimental import multihost_utils

jax.distributed.initialize()
ranks = multihost_utils.process_allgather(jnp.array([jax.process_index()]))
print(f"jax: process {jax.process_index()} of {jax.process_count()},"
      f" rank_sum={int(ranks.sum())}", flush=True)
jax.distributed.shutdown()
