"""`labkit serve baseline|triton|api`: each server in the foreground, on 127.0.0.1."""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from pathlib import Path

from labkit.cli.errors import (
    RunFailed,
    UsageError,
    existing_dir,
    nonneg_int,
    positive_float,
    positive_int,
)
from labkit.cli.errors import port as tcp_port
from labkit.serving.process import LOOPBACK
from labkit.serving.supervisor import MAX_FAILURES, WINDOW_S


def model_dir(value: str) -> str:
    """--model: a save_pretrained folder (config.json + tokenizer files)."""
    existing_dir(value)
    if not (Path(value) / "config.json").is_file():
        raise argparse.ArgumentTypeError(
            f"{value!r} has no config.json; pass a save_pretrained folder "
            "(e.g. Trained.save(...) or labkit train --save-model's <out>/model)"
        )
    return value


def onnx_dir(value: str) -> str:
    """--onnx: a folder from labkit.serving.export / quantize (encoder_model.onnx, decoder*.onnx)."""
    existing_dir(value)
    if not (Path(value) / "encoder_model.onnx").is_file():
        raise argparse.ArgumentTypeError(
            f"{value!r} has no encoder_model.onnx; export one with "
            "labkit.serving.export.export_onnx (then quantize_int8)"
        )
    return value


def _uvicorn(app, port: int, stopper: list | None = None) -> int:
    """Serve `app` until SIGINT/SIGTERM; `stopper` receives the server, so a watcher can stop it too."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host=LOOPBACK, port=port, log_level="warning", access_log=False))
    if stopper is not None:
        stopper.append(server)
    server.run()
    return 0


class _GiveUp:
    """What the Triton supervisor or the batching worker calls when it gives up: stop serving, exit 1 with `reason`."""

    def __init__(self):
        self.reason = ""
        self.servers: list = []

    def __call__(self, reason: str) -> None:
        self.reason = self.reason or reason
        for server in self.servers:
            server.should_exit = True  # uvicorn's own graceful stop, from any thread


def _baseline(args) -> int:
    from labkit.serving.baseline import create_app

    return _uvicorn(create_app(args.model, max_source_len=args.max_source_len, threads=args.threads), args.port)


def _needs_triton() -> None:
    """Triton is an extra with wheels for Linux glibc >= 2.35 only: say so in one line, not an ImportError."""
    from labkit.serving.availability import triton_missing

    why = triton_missing()
    if why:
        raise UsageError(f"{why}; or serve without Triton: labkit serve api --backend ort --onnx DIR")


def _triton(args) -> int:
    _needs_triton()
    from labkit.serving.triton import TritonSettings, serve

    serve(
        TritonSettings(
            onnx_dir=Path(args.onnx),
            http_port=args.port,
            grpc_port=args.grpc_port or args.port + 1,
            max_batch=args.max_batch,
            queue_delay_us=args.queue_delay_us,
            threads=args.threads,
            max_source_len=args.max_source_len,
            instances=args.instances,
        )
    )
    return 0


def _api(args) -> int:
    from labkit.serving.api import ApiSettings, create_app
    from labkit.serving.supervisor import RestartPolicy

    # restarts and give-ups are logged with a time (uvicorn keeps its own loggers)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    settings = ApiSettings(timeout_s=args.timeout, max_text_chars=args.max_text_chars)
    give_up = _GiveUp()

    def policy() -> RestartPolicy:
        return RestartPolicy(max_failures=args.max_restarts, window_s=args.restart_window)

    supervisor = None
    with contextlib.ExitStack() as stack:
        if args.backend == "ort":
            if not args.onnx:
                raise UsageError("--backend ort needs --onnx DIR; pass an exported (ideally int8) model folder")
            from labkit.serving.backends import MicroBatcher

            if args.front_batching == "off":
                raise UsageError(
                    "--front-batching off is for --backend triton; the ort backend always batches "
                    "(choose adaptive or fixed)"
                )

            def make():
                return MicroBatcher(
                    args.onnx,
                    max_batch=args.max_batch,
                    max_delay_ms=args.queue_delay_us / 1e3,
                    threads=args.threads,
                    max_source_len=args.max_source_len,
                    adaptive=args.front_batching == "adaptive",
                    policy=policy(),
                    on_give_up=give_up,
                )
        else:
            _needs_triton()
            url = args.triton_url
            if args.start_triton:
                if not args.onnx:
                    raise UsageError("--start-triton needs --onnx DIR; pass the int8 export folder")
                supervisor = stack.enter_context(_supervised_triton(args, policy(), give_up))
                srv = supervisor.srv
                url = srv.url if args.front_batching == "off" else srv.grpc_url
                print(
                    f"triton started at {url} (log: {srv.log_path}); restarted if it dies (up to "
                    f"{args.max_restarts} restarts per {args.restart_window:g} s)",
                    flush=True,
                )
            from labkit.serving.backends import TritonBackend, TritonBatcher

            if args.front_batching == "off":
                if url.startswith("grpc://"):
                    raise UsageError(
                        "--front-batching off forwards over HTTP; pass Triton's HTTP host:port as --triton-url"
                    )

                def make():
                    return TritonBackend(url)
            else:

                def make():
                    return TritonBatcher(
                        url,
                        max_batch=args.max_batch,
                        max_delay_ms=args.queue_delay_us / 1e3,
                        adaptive=args.front_batching == "adaptive",
                        policy=policy(),
                        on_give_up=give_up,
                    )

        print(f"labkit api on http://{LOOPBACK}:{args.port} (docs: /docs)", flush=True)
        _uvicorn(create_app(make, settings, supervisor=supervisor), args.port, stopper=give_up.servers)
    if give_up.reason:
        raise RunFailed(give_up.reason)
    return 0


@contextlib.contextmanager
def _supervised_triton(args, policy, give_up):
    """Triton on fixed loopback ports, restarted when it dies (`labkit.serving.supervisor`)."""
    from labkit.procs import free_ports
    from labkit.serving.supervisor import Supervisor
    from labkit.serving.triton import start_triton

    # a batch formed here must not wait again in Triton's queue
    delay = args.queue_delay_us if args.front_batching == "off" else 0
    http_port, grpc_port = free_ports(2)  # chosen together: never the same port twice

    def make():
        return start_triton(
            args.onnx,
            args.max_batch,
            delay,
            args.threads,
            args.max_source_len,
            instances=args.instances,
            port=http_port,
            grpc_port=grpc_port,
        )

    supervisor = Supervisor(make, "triton", policy, on_give_up=give_up)
    try:
        supervisor.start()
    except (RuntimeError, TimeoutError) as exc:  # Triton never got ready: its reason and log, one line
        supervisor.stop()
        raise RunFailed(f"Triton did not start: {str(exc).splitlines()[0]} (log: {supervisor.srv.log_path})") from None
    try:
        yield supervisor
    finally:
        supervisor.stop()


# what --threads 0 means, per server (labkit.serving.baseline / ort_generate.serving_threads)
ALL_CORES = "compute threads (0 = all cores; default 0)"
SOURCE_LEN_HELP = (
    "input tokens kept (0 = what the model was trained with, recorded in its tokenizer by "
    "labkit train; else 128; default 0)"
)
ALL_BUT_ONE = "ONNX Runtime threads (0 = all cores but one, left for the event loop and HTTP; default 0)"


def _common(p: argparse.ArgumentParser, default_port: int, threads_help: str) -> None:
    p.add_argument("--port", type=tcp_port, default=default_port, help=f"port on {LOOPBACK} (default {default_port})")
    p.add_argument("--threads", type=nonneg_int, default=0, help=threads_help)
    p.add_argument("--max-source-len", type=nonneg_int, default=0, help=SOURCE_LEN_HELP)


def _batching(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-batch", type=positive_int, default=32, help="largest batch the dynamic batcher forms")
    p.add_argument(
        "--queue-delay-us", type=nonneg_int, default=2000, help="longest wait for more requests to batch (µs)"
    )
    p.add_argument(
        "--instances", type=positive_int, default=1, help="Triton model instances running batches concurrently"
    )


def register(subparsers) -> None:
    p = subparsers.add_parser("serve", help="serve the model: baseline | triton | api")
    sub = p.add_subparsers(dest="server", metavar="SERVER", required=True)

    b = sub.add_parser("baseline", help="FastAPI + transformers pipeline, one request at a time")
    b.add_argument("--model", type=model_dir, required=True, help="save_pretrained folder (model + tokenizer)")
    _common(b, 8080, ALL_CORES)
    b.set_defaults(func=_baseline)

    t = sub.add_parser("triton", help="Triton (PyTriton) serving the ONNX model with dynamic batching")
    t.add_argument(
        "--onnx", type=onnx_dir, required=True, help="exported ONNX folder (labkit.serving.export / quantize)"
    )
    t.add_argument("--grpc-port", type=tcp_port, default=0, help="gRPC port (default: --port + 1)")
    _common(t, 8000, ALL_BUT_ONE)
    _batching(t)
    t.set_defaults(func=_triton)

    a = sub.add_parser("api", help="async FastAPI front: POST /v1/generate, GET /health, /docs")
    a.add_argument(
        "--backend",
        choices=("triton", "ort"),
        default="triton",
        help="forward to Triton (default) or batch in-process with ONNX Runtime",
    )
    a.add_argument(
        "--triton-url",
        default=f"{LOOPBACK}:8000",
        help="Triton endpoint: HTTP host:port, or grpc://host:port (gRPC, the faster hop)",
    )
    a.add_argument(
        "--front-batching",
        choices=("adaptive", "fixed", "off"),
        default="adaptive",
        help="batch in the API before Triton/ORT: adaptive (wait only for as many requests as the last "
        "batch had; one client is served at once), fixed (always wait up to --queue-delay-us), "
        "off (one Triton HTTP request per request; Triton's batcher groups them)",
    )
    a.add_argument("--start-triton", action="store_true", help="also start Triton (needs --onnx) and stop it on exit")
    a.add_argument("--onnx", type=onnx_dir, help="ONNX folder for --backend ort or --start-triton")
    a.add_argument("--timeout", type=positive_float, default=10.0, help="per-request timeout in seconds (504 after)")
    a.add_argument("--max-text-chars", type=positive_int, default=2000, help="longest accepted text (422 beyond)")
    a.add_argument(
        "--max-restarts",
        type=nonneg_int,
        default=MAX_FAILURES,
        help="restarts allowed within --restart-window: a Triton started here (--start-triton) or the "
        "batching worker that dies is restarted (first at once, then after 1, 2, 4 ... s; requests "
        "get 503 while Triton restarts; /health counts restarts); one failure more and the API exits "
        f"1 with the reason (default {MAX_FAILURES})",
    )
    a.add_argument(
        "--restart-window",
        type=positive_float,
        default=WINDOW_S,
        help=f"seconds over which --max-restarts counts deaths and failed restarts (default {WINDOW_S:g})",
    )
    _common(a, 8080, ALL_BUT_ONE)
    _batching(a)
    a.set_defaults(func=_api)


def main(argv: list[str] | None = None) -> int:
    """`python -m labkit.serving.cli serve ...`: the serve command without importing every other topic."""
    parser = argparse.ArgumentParser(prog="labkit")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:  # the CLI contract (labkit.cli.errors): one line, exit 2
        print(f"labkit serve {args.server}: {exc}", file=sys.stderr)
        return 2
    except RunFailed as exc:  # started and failed (Triton gave up): its reason, one line, exit 1
        print(f"labkit serve {args.server}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
