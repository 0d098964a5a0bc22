"""`infra/up`: run the local Pier stack in the foreground until Ctrl-C.

Today: one standalone broker (data in `<repo>/.pier/data`, port 9092). The stack is described by a list of
component starters (`COMPONENTS`), each starting its processes on the shared `Stack` and returning
the text that tells the developer how to use them; ZooKeeper, three brokers, the gateway and the admin
API are added by appending starters. Runs on the main thread; SIGINT/SIGTERM only set an event, and
the main thread stops every process through `Stack.close()`.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from infra.connect_help import client_snippets
from infra.errors import LaunchError
from infra.probes import port_in_use
from infra.stack import Stack

# State lives in the repository's .pier/ (git-ignored), wherever infra/up is run from.
DEFAULT_ROOT = Path(__file__).resolve().parents[1] / ".pier"
DEFAULT_PORT = 9092
HEALTH_CHECK_INTERVAL = 1.0

Starter = Callable[[Stack, argparse.Namespace], str]


def start_standalone_broker(stack: Stack, args: argparse.Namespace) -> str:
    if port_in_use(args.host, args.port):
        raise LaunchError(f"port {args.port} on {args.host} is in use; pick another with --port")
    broker = stack.add_broker(port=args.port, data_dir=args.data_dir)
    where = f"data {broker.data_dir}, log {broker.log_path}"
    return f"broker {broker.node_id}: {broker.bootstrap}  ({where})\n\n" + client_snippets(
        broker.bootstrap
    )


COMPONENTS: list[Starter] = [start_standalone_broker]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="infra/up", description="Run Pier locally until Ctrl-C.")
    parser.add_argument("--host", default="127.0.0.1", help="listen address (default %(default)s)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="broker port (%(default)s)")
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="state dir (%(default)s)")
    parser.add_argument("--data-dir", type=Path, help="broker data dir (default ROOT/data)")
    args = parser.parse_args(argv)
    args.root = args.root.resolve()
    args.data_dir = (args.data_dir or args.root / "data").resolve()
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    try:
        with Stack(args.root, host=args.host) as stack:
            for starter in COMPONENTS:
                print(starter(stack, args), flush=True)
            print("Pier is up. Press Ctrl-C to stop.", flush=True)
            return watch(stack, stop)
    except LaunchError as exc:
        print(f"infra/up: {exc}", file=sys.stderr)
        return 1
    finally:
        print("infra/up: stopped.", file=sys.stderr)


def watch(stack: Stack, stop: threading.Event) -> int:
    """Wait for Ctrl-C; if a process dies meanwhile, say which and fail."""
    while not stop.wait(HEALTH_CHECK_INTERVAL):
        for broker in stack.brokers:
            if broker.process.poll() is not None:
                print(
                    f"infra/up: broker {broker.node_id} exited with {broker.process.returncode};"
                    f" see {broker.log_path}",
                    file=sys.stderr,
                )
                return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
