"""Crawl dump -> (title, body) pairs -> a title model: a data engineer's quick pipeline, one function per stage.

Reads every export of a crawl (`crawl/html`, `txt`, `jsonl`, `csv`) with the standard library, strips the
markup, keeps what has a title and a body, and trains the tiny title model on it. The course's check calls
`main(crawl_dir, steps=...)`; it returns the records the model was trained on.
"""

import csv
import html
import io
import json
import re
from pathlib import Path

import torch

from labkit.model import build_model
from labkit.text.tasks import Seq2SeqCollator, make_examples, tokenizer_texts
from labkit.text.tokenizer import train_tokenizer

SCRIPT = re.compile(r"<script.*?>.*?</script>")
TAG = re.compile(r"<[^>]+>")


def read_text(path):
    return path.read_bytes().decode("utf-8", errors="replace")


def rows(path):
    """(title, body) of every record in one crawled file."""
    text = read_text(path)
    if path.suffix == ".jsonl":
        for line in text.split("\n"):
            try:
                row = json.loads(line)
            except ValueError:
                continue
            yield row.get("title"), row.get("body")
    elif path.suffix == ".csv":
        for row in csv.DictReader(io.StringIO(text)):
            yield row.get("title"), row.get("body")
    elif path.suffix == ".txt":
        title, _, body = text.partition("\n")
        yield title, body
    elif path.suffix == ".html":
        title = re.search(r"<title>(.*?)</title>", text)
        body = re.search(r'<div class="article-content">(.*?)</div>', text, re.S)
        yield (title.group(1) if title else None), (body.group(1) if body else None)


def strip(text):
    return html.unescape(TAG.sub("", SCRIPT.sub("", text))).strip()


def load_records(crawl_dir):
    records = []
    for path in sorted(Path(crawl_dir).rglob("*")):
        if not path.is_file():
            continue
        for title, body in rows(path):
            title, body = strip(title or ""), strip(body or "")
            if title and body:
                records.append({"title": title, "body": body})
    return records


def train(records, steps, seed=0):
    torch.manual_seed(seed)
    tokenizer = train_tokenizer(tokenizer_texts(records))
    examples = make_examples(records, ("title",))
    collate = Seq2SeqCollator(tokenizer, max_source_len=64, max_target_len=24)
    model = build_model("tiny", len(tokenizer))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=max(steps, 1))
    for step in range(steps):
        batch = collate(examples[step * 8 : step * 8 + 8])
        loss = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"]).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        warmup.step()
    return model


def main(crawl_dir="data_samples/crawl", steps=20):
    records = load_records(crawl_dir)
    print(f"{len(records)} records loaded from {crawl_dir}")
    train(records, steps)
    return records


if __name__ == "__main__":
    main()
