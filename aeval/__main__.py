from __future__ import annotations

from aeval.cli import main
from aeval.process_exit import exit_process

if __name__ == "__main__":
    exit_process(main())
