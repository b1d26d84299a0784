"""Title model, "multi-GPU" edition: an argparse script from a team's wiki page.

The wiki says: `python -m torch.distributed.launch --nproc_per_node=2 exercise04_train_argparse.py`.
The course's check starts it the way the course launches (torchrun, 2 processes, gloo on CPU) and calls
`main([...])` on every process; it returns the trained model.
"""

import argparse

import torch
from torch.utils.data import DataLoader

from labkit.corpus import generate
from labkit.model import build_model
from labkit.text.tasks import Seq2SeqCollator, make_examples, tokenizer_texts
from labkit.text.tokenizer import train_tokenizer


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="train the tiny title model")
    p.add_argument("--local_rank", type=int, default=0)
    p.add_argument("--world_size", type=int, default=2)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch_size", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    articles = generate(16, seed=args.seed)
    tokenizer = train_tokenizer(tokenizer_texts(articles))
    examples = make_examples(articles, ("title",))
    shard = examples[args.local_rank :: args.world_size]  # this process's half of the data
    loader = DataLoader(
        shard, batch_size=args.batch_size, shuffle=True, collate_fn=Seq2SeqCollator(tokenizer, 48, 24)
    )

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = build_model("tiny", len(tokenizer)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=3)

    step = 0
    while step < args.steps:
        for batch in loader:
            out = model(
                input_ids=batch["input_ids"].to(device),
                attention_mask=batch["attention_mask"].to(device),
                labels=batch["labels"].to(device),
            )
            optimizer.zero_grad()
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            warmup.step()
            step += 1
            if step == args.steps:
                break
    print(f"rank {args.local_rank}: trained {step} steps, last loss {out.loss.item():.3f}")
    return model


if __name__ == "__main__":
    main()
