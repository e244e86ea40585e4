"""`python -m turnout_sim [--host H] [--port N]`: serve the simulator."""

from __future__ import annotations

import argparse

from turnout_sim.app import DEFAULT_HOST, DEFAULT_PORT, run


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and serve until interrupted."""
    parser = argparse.ArgumentParser(
        prog="turnout_sim", description="Fake upstream LLM provider."
    )
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    args = parser.parse_args(argv)
    run(args.host, args.port)


if __name__ == "__main__":
    main()
