"""aeval's repair rounds as a verifiers environment (env id ``aeval-repair``).

verifiers imports the module named by the env id and calls its ``load_environment``
(``vf.load_environment("aeval-repair", rounds=3, feedback="counterexample")``); the
environment itself is :mod:`aeval.interop.verifiers_env` (docs/repair.md).
"""

from aeval.interop.verifiers_env import RepairEnv, load_environment

__all__ = ["RepairEnv", "load_environment"]
