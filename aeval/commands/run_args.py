"""``python -m aeval run``'s arguments: light, so ``run --help`` builds without the
engine (:mod:`aeval.commands.run` does the run)."""

from __future__ import annotations

import argparse
from pathlib import Path

from aeval.commands.drive import add_cloud_arguments, add_display_arguments, add_poll_arguments
from aeval.commands.options import (
    non_negative_int,
    positive_float,
    positive_int,
)
from aeval.config import (
    APIS,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_REQUEST_TIMEOUT_S,
    ENDPOINTS,
    MISSION_MODELS,
)
from aeval.feedback import FEEDBACK_LEVELS
from aeval.prompts import PROTOCOLS
from aeval.reasoning import EFFORTS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        "-m",
        action="append",
        metavar="NAME",
        help="model to evaluate (repeat or comma-separate; default: "
        + ", ".join(MISSION_MODELS)
        + ")",
    )
    parser.add_argument(
        "--trials", type=positive_int, default=1, metavar="N", help="runs per model"
    )
    data = parser.add_argument_group("benchmark rows")
    data.add_argument(
        "--dataset",
        metavar="REF",
        help="hub id, .parquet/.jsonl/.csv file or saved dataset directory "
        "(default: the WARP benchmark; offline: the bundled demo benchmark)",
    )
    data.add_argument(
        "--dataset-revision",
        metavar="REV",
        help="hub branch, tag or commit to load (default: the commit main points at, "
        "pinned in the run so a resume loads the same rows)",
    )
    data.add_argument(
        "--sample-id",
        dest="sample_ids",
        metavar="IDS",
        help="only the items with these ids: comma-separated, A-B for a range "
        "(e.g. 5,7,10-20); applied before --tier, --sample and --limit",
    )
    data.add_argument("--tier", help="only rows of this tier (small, medium, large)")
    data.add_argument(
        "--sample",
        type=positive_int,
        metavar="N",
        help="N rows drawn at random (see --sample-seed)",
    )
    data.add_argument(
        "--sample-seed",
        dest="sample_seed",
        type=int,
        default=0,
        metavar="S",
        help="seed of the rows --sample draws (not the model's: see --generation-seed)",
    )
    data.add_argument("--limit", type=positive_int, metavar="N", help="first N rows only")
    gen = parser.add_argument_group("prompt and generation (sent only when given)")
    gen.add_argument("--instruction-file", type=Path, help="instruction text after each question")
    gen.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="default",
        help="generation protocol: 'default' (the seed instruction after each question) or "
        "'warp-2025' (the WARP study's instruction before each question)",
    )
    gen.add_argument("--system-file", type=Path, help="system message")
    gen.add_argument("--temperature", type=float, help="sampling temperature, 0 to 2")
    gen.add_argument("--top-p", type=float, help="nucleus sampling, 0 to 1")
    tokens = gen.add_mutually_exclusive_group()
    tokens.add_argument(
        "--max-tokens",
        type=positive_int,
        metavar="N",
        help="most output tokens per answer (also bounds the cost estimate)",
    )
    tokens.add_argument(
        "--max-completion-tokens",
        type=positive_int,
        metavar="N",
        help="for reasoning models (instead of --max-tokens)",
    )
    gen.add_argument("--generation-seed", type=int, metavar="S", help="the API's sampling seed")
    gen.add_argument(
        "--reasoning-effort",
        metavar="LEVEL",
        help=f"how hard every model thinks: {', '.join(EFFORTS)}, written into each "
        "provider's own field (a variant MODEL@LEVEL or MODEL@N, a thinking budget in "
        "tokens, sets one model's; docs/reasoning.md)",
    )
    gen.add_argument(
        "--extra-body",
        metavar="JSON",
        help="a JSON object merged into every request body of direct mode and of openai/ "
        'models, e.g. \'{"chat_template_kwargs": {"enable_thinking": true}}\' for vLLM or SGLang',
    )
    repair = parser.add_argument_group("repair rounds (docs/repair.md)")
    repair.add_argument(
        "--rounds",
        type=positive_int,
        default=1,
        metavar="K",
        help="ask each wrong answer again with the solver's feedback, up to K answers per "
        "item (default 1: no repair)",
    )
    repair.add_argument(
        "--feedback",
        choices=FEEDBACK_LEVELS,
        help="what the feedback tells after a wrong answer: 'retry' (only that it is wrong), "
        "'reason' (what the verdict found), 'counterexample' (also an input on which the "
        "formulas disagree; the default with --rounds)",
    )
    repair.add_argument(
        "--feedback-file",
        type=Path,
        metavar="FILE",
        help="the feedback message's template, with {verdict}, {reason} and {counterexample} "
        "fields (kept byte for byte in config.json)",
    )
    direct = parser.add_argument_group(
        "how answers are obtained (docs/providers.md: which servers support which)"
    )
    direct.add_argument(
        "--api",
        choices=APIS,
        default="batch",
        help="'batch': the Batch API (files + batches; half price, within 24 h); 'direct': one "
        "request per answer to /v1/chat/completions, for servers without a Batch API "
        "(vLLM, SGLang, Ollama, llama.cpp…) at full price",
    )
    direct.add_argument(
        "--max-connections",
        type=positive_int,
        default=DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help="direct: most requests in flight at once, over all models and trials; lowered "
        "while the server answers 429/503",
    )
    direct.add_argument(
        "--request-timeout",
        type=positive_float,
        default=DEFAULT_REQUEST_TIMEOUT_S,
        metavar="S",
        help="direct: seconds one request may take before it is retried",
    )
    direct.add_argument(
        "--endpoint",
        choices=ENDPOINTS,
        default="chat",
        help="'chat' (/v1/chat/completions), 'completions' (direct: /v1/completions, for "
        "base models; needs --prompt-template) or 'responses' (OpenAI's Responses API, "
        "/v1/responses, batch or direct)",
    )
    direct.add_argument(
        "--prompt-template",
        type=Path,
        metavar="FILE",
        help="direct, --endpoint completions: the prompt, with a {question} slot and "
        "optionally {instruction}",
    )
    ver = parser.add_argument_group("verification")
    ver.add_argument(
        "--check-timeout",
        type=positive_float,
        metavar="S",
        help="hard wall-clock budget per answer (default 10 s)",
    )
    ver.add_argument(
        "--no-published",
        dest="published",
        action="store_false",
        help="skip the published reading (the study's own evaluator): the "
        "correct_published column stays empty",
    )
    ver.add_argument(
        "--published-binary",
        action="store_true",
        help="give every published reading from the z3 binary, one process per answer, "
        "as the study ran it (an audit; by default answers whose outcome is provably "
        "the binary's are read in the verifier)",
    )
    add_poll_arguments(parser)
    parser.add_argument(
        "--retry-failed",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="resubmit requests that failed for retryable reasons (batch_expired, HTTP 408, 409, "
        "429, 5xx: aeval.batch.retry) "
        "up to N times",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("results"),
        metavar="DIR",
        help="where this command writes: the run directory goes in DIR/<run-id>",
    )
    parser.add_argument(
        "--run-id", help="name of the run directory (default: date, time and a random tag)"
    )
    parser.add_argument(
        "--resume",
        type=Path,
        metavar="RUN_DIR",
        help="continue this run directory instead of starting a new run "
        "(the same as 'python -m aeval resume RUN_DIR')",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="write the request files and show what would be sent and what it would cost, "
        "without calling the API",
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="use the local batch server with synthetic models even when a key is set",
    )
    add_cloud_arguments(parser)
    add_display_arguments(parser)
