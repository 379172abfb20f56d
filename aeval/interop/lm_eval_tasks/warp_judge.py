"""What the task files' ``!function`` tags name: aeval's loader, prompt and judge.

The harness imports this file by its path, so it only re-exports
:mod:`aeval.interop.lm_eval_task`, where the one judge a process shares lives.
"""

from aeval.interop.lm_eval_task import doc_to_text, load_docs, process_results

__all__ = ["doc_to_text", "load_docs", "process_results"]
