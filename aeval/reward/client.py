"""A client of ``aeval serve-reward``, which sends the service's token.

The token comes from ``AEVAL_REWARD_TOKEN``, the variable the service reads its own from, so
one ``export`` on the cluster serves both sides. :class:`RewardClient` is the Python client;
:func:`reward_func` is OpenRLHF's custom reward function for the same service: OpenRLHF loads
it from this file's path (``--reward.remote_url /path/to/aeval/reward/client.py``, formerly
``--remote_rm_url``; ``python -c "import aeval.reward.client as c; print(c.__file__)"`` prints
it) and calls ``reward_func(queries, prompts, labels)`` once per sample, in a thread
(OpenRLHF ``openrlhf/utils/agent.py``, ``SingleTurnAgentExecutor._fetch_rewards_via_func``).
The service's URL is then ``AEVAL_REWARD_URL``. OpenRLHF's own HTTP client sends no header;
a URL ``http://aeval:TOKEN@HOST:PORT/get_reward`` makes it send the token as Basic
credentials, which the service accepts too, but puts the token on OpenRLHF's command line.
"""

from __future__ import annotations

import os
from typing import Any

import httpx

__all__ = ["TOKEN_ENV", "URL_ENV", "RewardClient", "reward_func"]

TOKEN_ENV = "AEVAL_REWARD_TOKEN"
URL_ENV = "AEVAL_REWARD_URL"


class RewardClient:
    """Posts OpenRLHF's request shape to ``url`` (``http://HOST:PORT/get_reward``).

    :param token: the service's token; default: ``AEVAL_REWARD_TOKEN`` (none: no header).
    :param timeout_s: one request's timeout (OpenRLHF's own client allows 180 s).
    """

    def __init__(self, url: str, *, token: str | None = None, timeout_s: float = 180.0) -> None:
        token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.url = url
        self._client = httpx.Client(headers=headers, timeout=timeout_s)

    def score(
        self, queries: list[str], prompts: list[str] | None, labels: list[Any]
    ) -> dict[str, Any]:
        """The service's reply (``rewards``, ``scores``, ``extra_logs``, ``label_errors``).

        :raises httpx.HTTPStatusError: the service refused the request (its ``error`` says why).
        """
        body: dict[str, Any] = {"query": queries, "labels": labels}
        if prompts is not None:
            body["prompts"] = prompts
        reply = self._client.post(self.url, json=body)
        reply.raise_for_status()
        answer: dict[str, Any] = reply.json()
        return answer

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> RewardClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def reward_func(queries: list[str], prompts: list[str], labels: list[Any]) -> dict[str, Any]:
    """OpenRLHF's custom reward function: the service at ``AEVAL_REWARD_URL`` scores the
    samples, with the token of ``AEVAL_REWARD_TOKEN``; its reply is what OpenRLHF reads."""
    url = os.environ.get(URL_ENV)
    if not url:
        raise RuntimeError(f"set {URL_ENV} to the reward service's http://HOST:PORT/get_reward")
    with RewardClient(url) as client:
        return client.score(queries, prompts, labels)
