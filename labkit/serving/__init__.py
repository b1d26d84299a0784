"""Serving the trained generator: ONNX export, int8, ONNX Runtime generation, three servers, load tests.

The pieces, in the order notebook 08 uses them:

- `export.export_onnx` / `quantize.quantize_int8`: encoder + decoder-with-past ONNX, dynamic int8;
- `ort_generate.OrtGenerator`: batched greedy generation over ONNX Runtime sessions;
- `parity`: ONNX fp32 equals PyTorch token for token; int8's ROUGE-L delta;
- `baseline`, `triton`, `api`: the three servers (`labkit serve baseline|triton|api`);
- `process.ServerProcess`: start one as a real subprocess, wait until ready, always stop it;
- `loadgen`: the async, loopback-only load generator; `bench`: the `labkit bench serve` command and `--compare`.
- `measure`: notebook 08's measurements (each step in isolation, each server stack under load).
"""
