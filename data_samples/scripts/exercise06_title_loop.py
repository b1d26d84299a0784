"""A title model trained with a plain functional loop, on a crawl with a few accidents left in it.

One process. The learning rate worked in the team's small experiments; on this data a layer's gradient
now and then jumps to many times its usual size, and the team blames the crawl accidents (bodies pasted
three times with runs of emoji). The course's check calls `main(...)`; it returns the run's losses.
"""

import itertools
import random

import torch
from torch.utils.data import DataLoader

from labkit.corpus import generate
from labkit.model import build_model
from labkit.text.tasks import Seq2SeqCollator, make_examples, tokenizer_texts
from labkit.text.tokenizer import train_tokenizer
from labkit.training.explosions import hostile_examples


def make_data(n_articles, seed):
    articles = generate(n_articles, seed=seed)
    tokenizer = train_tokenizer(tokenizer_texts(articles))
    clean = make_examples(articles, ("title",))
    data = clean + hostile_examples(clean, n=len(clean) // 4, seed=seed)  # bodies pasted 3x with emoji runs
    random.Random(seed).shuffle(data)
    return tokenizer, data


def batches(data, tokenizer, batch_size, max_source_len=96):
    collate = Seq2SeqCollator(tokenizer, max_source_len=max_source_len, max_target_len=24)
    loader = DataLoader(data, batch_size=batch_size, shuffle=True, collate_fn=collate)
    while True:
        yield from loader


def loss_of(model, batch):
    return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"]).loss


def fit(model, stream, steps, lr):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    for batch in itertools.islice(stream, steps):
        loss = loss_of(model, batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def main(steps=24, batch_size=8, lr=3e-2, n_articles=48, seed=0):
    torch.manual_seed(seed)
    tokenizer, data = make_data(n_articles, seed)
    model = build_model("tiny", len(tokenizer))
    losses = fit(model, batches(data, tokenizer, batch_size), steps, lr)
    print("loss:", " ".join(f"{x:.2f}" for x in losses))
    return losses


if __name__ == "__main__":
    main()
