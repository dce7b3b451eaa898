"""python -m ranklock: the CLI."""

from .cli import main

main()
