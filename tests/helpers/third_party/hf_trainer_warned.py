"""hf_trainer.py with the one line docs/recipes.md adds to save on the wall-time warning:
callbacks=[SaveOnWarning()] (hpc_toolkit.hf_requeue). The rest is the test's: a step of
0.2 s (StepClock) and a mark, $HPC_EXP_DIR/marks/ready_<attempt>, once step 5 is done."""

import os
import time
from pathlib import Path

import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    HfArgumentParser,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)
from transformers.trainer_utils import get_last_checkpoint

from hpc_toolkit.hf_requeue import SaveOnWarning


class Toy(torch.utils.data.Dataset):
    def __len__(self):
        return 4096

    def __getitem__(self, i):
        return {"input_ids": torch.tensor([1 + i % 7, 2, 3, 4]), "labels": torch.tensor(i % 2)}


class StepClock(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        time.sleep(0.2)
        if state.global_step == 5 and state.is_world_process_zero:
            attempt = int(os.environ.get("HPC_RESTART_COUNT", "0")) + 1
            marks = Path(os.environ["HPC_EXP_DIR"]) / "marks"
            marks.mkdir(parents=True, exist_ok=True)
            (marks / f"ready_{attempt}").touch()


def main():
    (args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
    config = BertConfig(vocab_size=16, hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=16)
    model = BertForSequenceClassification(config)
    last = get_last_checkpoint(args.output_dir) if os.path.isdir(args.output_dir) else None
    trainer = Trainer(model=model, args=args, train_dataset=Toy(),
                      callbacks=[StepClock(), SaveOnWarning()])
    trainer.train(resume_from_checkpoint=last)
    if trainer.is_world_process_zero():
        print(f"hf: world_size={args.world_size} global_step={trainer.state.global_step}"
              f" resumed_from={last and os.path.basename(last)}", flush=True)


if __name__ == "__main__":
    main()
