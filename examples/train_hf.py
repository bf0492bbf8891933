#!/usr/bin/env python3
"""A GPT-2 (124 M) language model trained with Hugging Face's Trainer on random tokens.

The command line is Trainer's own (HfArgumentParser over TrainingArguments), so the flags
vramwatch advises for a Hugging Face job (--per_device_train_batch_size,
--gradient_accumulation_steps, --gradient_checkpointing, --bf16/--fp16) are the ones this
script takes, plus two of its own (--n_layer, --seq_len). Nothing is downloaded: the model is
built from a config, the data are random token ids, so it runs offline (HF_HUB_OFFLINE=1):

    vramwatch run --sim 24GiB -- python3 examples/train_hf.py --output_dir /tmp/hf \\
        --per_device_train_batch_size 32 --max_steps 2 --report_to none

It prints torch.cuda.max_memory_reserved() at the end, the figure to compare a prediction with.
"""
from dataclasses import dataclass, field

import torch
from transformers import (GPT2Config, GPT2LMHeadModel, HfArgumentParser, Trainer,
                          TrainingArguments)


@dataclass
class ModelArguments:
    # GPT-2 small's shape by default: what "fine-tune GPT-2 on one GPU" jobs run.
    n_layer: int = field(default=12, metadata={"help": "transformer blocks"})
    n_embd: int = field(default=768, metadata={"help": "width"})
    n_head: int = field(default=12, metadata={"help": "attention heads"})
    seq_len: int = field(default=1024, metadata={"help": "tokens per sample (n_positions too)"})
    vocab_size: int = field(default=50257, metadata={"help": "GPT-2's vocabulary"})


class RandomTokens(torch.utils.data.Dataset):
    """Random token ids, seeded; labels are the inputs (Trainer's causal LM shifts them)."""

    def __init__(self, rows, seq_len, vocab):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (rows, seq_len), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def main():
    margs, targs = HfArgumentParser((ModelArguments, TrainingArguments)).parse_args_into_dataclasses()
    cfg = GPT2Config(n_layer=margs.n_layer, n_embd=margs.n_embd, n_head=margs.n_head,
                     n_positions=margs.seq_len, vocab_size=margs.vocab_size)
    model = GPT2LMHeadModel(cfg)
    # Enough rows for every step asked for, and no more: the dataset lives in host memory.
    steps = targs.max_steps if targs.max_steps > 0 else 2
    per_step = targs.per_device_train_batch_size * targs.gradient_accumulation_steps
    data = RandomTokens(per_step * max(1, targs.world_size) * steps, margs.seq_len, margs.vocab_size)
    trainer = Trainer(model=model, args=targs, train_dataset=data)
    trainer.train()
    if torch.cuda.is_available():
        print(f"max_memory_reserved {torch.cuda.max_memory_reserved()}", flush=True)


if __name__ == "__main__":
    main()
