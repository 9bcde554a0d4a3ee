"""`python -m selfcap`: the same as the `selfcap` command."""

from ._cli import main

main()
