"""The `selfcap` console command: the whole Rust CLI, run in this process."""

import signal
import sys

from . import _native


def main() -> None:
    """Run `selfcap` on this process's arguments and exit with its code."""
    # Python turns SIGINT into KeyboardInterrupt, which the Rust code never
    # sees while it runs (with the GIL released): restore the default, so
    # Ctrl-C ends `selfcap watch` and `selfcap mcp` as it ends the binary.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # SIGPIPE stays ignored, as Python and Rust both leave it: a closed
    # stdout (`selfcap ... | head`) is handled by the Rust side.
    code = _native.run_cli(["selfcap", *sys.argv[1:]])
    sys.exit(code)


if __name__ == "__main__":
    main()
