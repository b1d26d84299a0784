"""Multi-task training (title, summary, keywords) on several processes, from a team that "avoids DDP's magic".

`torchrun --nproc_per_node=2 exercise07_multitask_loop.py`: every rank builds the same model from the same seed,
reads its own shard through a DistributedSampler, and the ranks average their losses every step so that
"everyone trains on the same loss". Rank 0 logs and saves. The course's check calls `main(...)` on every rank;
it returns the trained model.
"""

import os

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler

from labkit.corpus import generate
from labkit.model import build_model
from labkit.text.tasks import Seq2SeqCollator, make_examples, tokenizer_texts
from labkit.text.tokenizer import train_tokenizer


def setup():
    dist.init_process_group("gloo")
    return dist.get_rank(), dist.get_world_size()


def sync_loss(loss, world):
    """The loss every rank agrees on: the mean over the ranks."""
    dist.all_reduce(loss, op=dist.ReduceOp.SUM)
    return loss / world


def train_step(model, optimizer, batch, world):
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"])
    loss = sync_loss(out.loss, world)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.item()


def main(epochs=2, n_articles=8, batch_size=4, out_dir=None):
    rank, world = setup()
    torch.manual_seed(0)
    articles = generate(n_articles, seed=0)
    tokenizer = train_tokenizer(tokenizer_texts(articles))
    examples = make_examples(articles)  # three tasks per article
    sampler = DistributedSampler(examples, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(examples, batch_size=batch_size, sampler=sampler, collate_fn=Seq2SeqCollator(tokenizer, 48, 24))
    model = build_model("tiny", len(tokenizer))
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=3)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for batch in loader:
            loss = train_step(model, optimizer, batch, world)
            warmup.step()
        if rank == 0:
            print(f"epoch {epoch}: loss {loss:.3f}")
    if rank == 0 and out_dir:
        torch.save(model.state_dict(), os.path.join(out_dir, "multitask.pt"))
    dist.barrier()
    dist.destroy_process_group()
    return model


if __name__ == "__main__":
    main()
