"""A Transformers script in the shape of the library's own run_clm.py (Transformers 5):
HfArgumentParser over a ModelArguments dataclass and TrainingArguments, a model made from
a config (no hub download), and a resume only from the path given as
--resume_from_checkpoint (`checkpoint = training_args.resume_from_checkpoint`,
`trainer.train(resume_from_checkpoint=checkpoint)`): it never looks in --output_dir itself.

    python hf_resume_arg.py --output_dir DIR --max_steps 400 --save_steps 20 [--resume_from_checkpoint DIR/checkpoint-N]
"""

import time
from dataclasses import dataclass, field

import torch
from transformers import BertConfig, BertForSequenceClassification, HfArgumentParser, Trainer, TrainingArguments


@dataclass
class ModelArguments:
    hidden_size: int = field(default=16, metadata={"help": "the model's width"})
    step_seconds: float = field(default=0.02, metadata={"help": "time per sample (a slow loader)"})


class Toy(torch.utils.data.Dataset):
    def __init__(self, pause):
        self.pause = pause

    def __len__(self):
        return 64

    def __getitem__(self, i):
        time.sleep(self.pause)
        return {"input_ids": torch.tensor([1 + i % 7, 2, 3, 4]), "labels": torch.tensor(i % 2)}


def main():
    parser = HfArgumentParser((ModelArguments, TrainingArguments))
    model_args, training_args = parser.parse_args_into_dataclasses()
    config = BertConfig(vocab_size=16, hidden_size=model_args.hidden_size, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=16)
    model = BertForSequenceClassification(config)
    trainer = Trainer(model=model, args=training_args, train_dataset=Toy(model_args.step_seconds))
    checkpoint = None
    if training_args.resume_from_checkpoint is not None:
        checkpoint = training_args.resume_from_checkpoint
    trainer.train(resume_from_checkpoint=checkpoint)
    print(f"hf: global_step={trainer.state.global_step} resumed_from={checkpoint}", flush=True)


if __name__ == "__main__":
    main()
