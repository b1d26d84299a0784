"""Text side of the model: tokenizer, task formatting + collation, metrics."""
