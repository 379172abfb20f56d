"""A Batch-API output line as OpenAI's batch output files hold it, written by hand (not by
aeval's own writer), for tests that feed answers to rescore, the pool or the cluster."""

from __future__ import annotations

import json


def ok_line(custom_id: str, content: str, model: str, *, finish: str = "stop") -> str:
    """A 200 answer of ``model`` saying ``content`` (100 prompt and 10 completion tokens)."""
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }
    line = {"id": "batch_req_" + custom_id, "custom_id": custom_id, "error": None}
    line["response"] = {"status_code": 200, "request_id": "r", "body": body}
    return json.dumps(line)
