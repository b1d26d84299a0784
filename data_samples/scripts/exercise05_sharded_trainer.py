"""Another team's multi-process trainer for the title model: a small class, its own sharding.

Launched with `torchrun --nproc_per_node=2 exercise05_sharded_trainer.py`-style launchers; the course's
check calls `main(...)` on every rank. The team wanted each rank to see "a different random part of
the data every epoch", so every rank shuffles the example indices and keeps every N-th one.
"""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader

from labkit.corpus import generate
from labkit.model import build_model
from labkit.text.tasks import Seq2SeqCollator, make_examples, tokenizer_texts
from labkit.text.tokenizer import train_tokenizer


class ShardedTrainer:
    def __init__(self, n_articles=16, batch_size=4, lr=1e-3, seed=0):
        dist.init_process_group("gloo")
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.seed = seed
        torch.manual_seed(seed)
        articles = generate(n_articles, seed=seed)
        self.tokenizer = train_tokenizer(tokenizer_texts(articles))
        self.examples = make_examples(articles, ("title",))
        self.collate = Seq2SeqCollator(self.tokenizer, max_source_len=48, max_target_len=24)
        self.batch_size = batch_size
        self.model = DDP(build_model("tiny", len(self.tokenizer)))
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr)
        self.warmup = torch.optim.lr_scheduler.LinearLR(self.optimizer, start_factor=0.1, total_iters=4)

    def shard(self, epoch):
        # a fresh shuffle per epoch; the rank's own stream, so the ranks do not all draw the same order
        g = torch.Generator().manual_seed(self.seed + 1000 * self.rank + epoch)
        order = torch.randperm(len(self.examples), generator=g).tolist()
        return order[self.rank :: self.world]

    def train_epoch(self, epoch):
        loader = DataLoader(self.examples, batch_size=self.batch_size, sampler=self.shard(epoch), collate_fn=self.collate)
        for batch in loader:
            loss = self.model(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"]
            ).loss
            self.optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optimizer.step()
            self.warmup.step()
        return loss.item()

    def fit(self, epochs):
        for epoch in range(epochs):
            loss = self.train_epoch(epoch)
            if self.rank == 0:
                print(f"epoch {epoch}: loss {loss:.3f}")
        return self.model


def main(epochs=3, n_articles=16, batch_size=4):
    trainer = ShardedTrainer(n_articles=n_articles, batch_size=batch_size)
    model = trainer.fit(epochs)
    dist.destroy_process_group()
    return model


if __name__ == "__main__":
    main()
