"""aeval's repair rounds as a verifiers environment (env / taskset id ``aeval-repair``).

verifiers 0.4 (``verifiers.v1``) imports the module named by the taskset id and takes
the ``Taskset`` and ``Env`` subclasses its ``__all__`` exports
(``vf.load_environment(vf.resolve_env_config({"taskset": {"id": "aeval-repair"}}))``,
or ``vf-eval aeval-repair``): :mod:`aeval.interop.verifiers_taskset`.

verifiers 0.3 (``verifiers.legacy``) imports the same module and calls its
``load_environment`` (``vf.load_environment("aeval-repair", rounds=3)``):
:mod:`aeval.interop.verifiers_env`, where that API still exists. docs/repair.md.
"""

from aeval.interop.verifiers_taskset import RepairEnv, RepairTaskset

try:  # verifiers 0.3: the classic MultiTurnEnv, as verifiers.legacy
    from aeval.interop.verifiers_env import load_environment
except ImportError:  # verifiers 0.4 has no verifiers.legacy
    from aeval.interop.verifiers_taskset import load_environment

__all__ = ["RepairEnv", "RepairTaskset", "load_environment"]
