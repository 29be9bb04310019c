"""``python -m tensordesc ARGS...``: the ``tensordesc`` command (see ``tensordesc --help``
and docs/cli.md)."""

from ._cli import main

if __name__ == "__main__":
    main(prog="python -m tensordesc")
