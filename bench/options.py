"""The command line the bench scripts share: one ``--name`` option per default.

A script imports it as a sibling (``python bench/x.py`` puts ``bench/`` first on
``sys.path``) and adds by hand only the options a default cannot say (flags, help).
"""

from __future__ import annotations

import argparse


def options_parser(doc: str, /, **defaults: object) -> argparse.ArgumentParser:
    """A parser described by ``doc``'s first paragraph, with ``--name`` for each keyword.

    ``rows=60`` gives ``--rows`` of type int, default 60 (``_`` in a name reads
    ``-``); a type alone (``workers=int``) gives that type, default None; a tuple
    offers its items as the only choices, the first the default.
    """
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    for name, default in defaults.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(default, type):
            parser.add_argument(flag, type=default, default=None)
        elif isinstance(default, tuple):
            parser.add_argument(flag, choices=default, default=default[0])
        else:
            parser.add_argument(flag, type=type(default), default=default)
    return parser
