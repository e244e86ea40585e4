"""`python -m turnout_sim [--host H] [--port N] [--seed S]`: serve the simulator."""

from __future__ import annotations

import argparse

from turnout_sim.app import DEFAULT_HOST, DEFAULT_PORT, run


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and serve until interrupted."""
    parser = argparse.ArgumentParser(prog="turnout_sim", description="Fake upstream LLM provider.")
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument(
        "--seed", type=int, default=None, help="seed of fail<P> rolls (default: $TURNOUT_SIM_SEED or 0)"
    )
    args = parser.parse_args(argv)
    run(args.host, args.port, seed=args.seed)


if __name__ == "__main__":
    main()
