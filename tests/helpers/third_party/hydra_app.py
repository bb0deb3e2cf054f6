"""A Hydra app as Hydra's tutorial writes it: @hydra.main, a structured config, key=value
overrides on the command line, and its output written where Hydra runs it
(HydraConfig's output_dir: outputs/<date>/<time> by default, relative to where it starts).

    python hydra_app.py optimizer.lr=0.1 model.depth=2
    python hydra_app.py -m optimizer.lr=0.1,0.01
"""

import os
import time
from dataclasses import dataclass, field

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig


@dataclass
class Optimizer:
    lr: float = 0.001


@dataclass
class Model:
    depth: int = 1


@dataclass
class Config:
    optimizer: Optimizer = field(default_factory=Optimizer)
    model: Model = field(default_factory=Model)
    seconds: float = 1.0


ConfigStore.instance().store(name="config", node=Config)


@hydra.main(version_base=None, config_name="config")
def main(cfg: Config) -> None:
    out = HydraConfig.get().runtime.output_dir
    time.sleep(cfg.seconds)
    with open(os.path.join(out, "result.txt"), "w", encoding="utf-8") as f:
        f.write(f"lr={cfg.optimizer.lr} depth={cfg.model.depth}\n")
    print(f"hydra_app: lr={cfg.optimizer.lr} depth={cfg.model.depth} wrote {out}", flush=True)


if __name__ == "__main__":
    main()
