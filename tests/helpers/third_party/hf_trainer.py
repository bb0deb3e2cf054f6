"""A Transformers Trainer script as the library's examples write it: TrainingArguments from
the command line (HfArgumentParser), resume from the last checkpoint in --output_dir."""

import os

import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    HfArgumentParser,
    Trainer,
    TrainingArguments,
)
from transformers.trainer_utils import get_last_checkpoint


class Toy(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return {"input_ids": torch.tensor([1 + i % 7, 2, 3, 4]), "labels": torch.tensor(i % 2)}


def main():
    (args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
    config = BertConfig(vocab_size=16, hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=16)
    model = BertForSequenceClassification(config)
    last = get_last_checkpoint(args.output_dir) if os.path.isdir(args.output_dir) else None
    trainer = Trainer(model=model, args=args, train_dataset=Toy())
    trainer.train(resume_from_checkpoint=last)
    if trainer.is_world_process_zero():
        print(f"hf: world_size={args.world_size} global_step={trainer.state.global_step}"
              f" resumed_from={last and os.path.basename(last)}", flush=True)


if __name__ == "__main__":
    main()
