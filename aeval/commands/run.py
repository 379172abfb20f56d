"""``python -m aeval run``: run models on the benchmark through a batch API.

With no API key in the environment this is the offline demo: a local batch
server starts in the background with synthetic models, and the run goes to it
exactly as it would go to OpenAI (the engine only sees a base URL and a key).

Every input is checked before a run directory is created: the flags while
they are parsed, then the rows they select (a ``--tier`` no row has, a
``--sample-id`` no row has), which are loaded once up front. A paid run and a
``--dry-run`` then print their estimated cost (:mod:`aeval.cost`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from aeval.commands.drive import (
    EXIT_FINISHED,
    add_display_arguments,
    add_poll_arguments,
    command_credentials,
    display_mode,
    execute,
    offline_responders,
    offline_server,
    poll_settings,
    ray_address,
    retry_settings,
)
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
    RunConfig,
)
from aeval.errors import ConfigError, RunDirError
from aeval.json_values import JsonObject
from aeval.prompts import PROTOCOLS, Protocol
from aeval.reasoning import EFFORTS, Effort, check_effort
from aeval.store import RunLayout, new_run_id


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
    add_display_arguments(parser)


def _models(values: list[str] | None) -> tuple[str, ...]:
    if not values:
        return MISSION_MODELS
    return tuple(m.strip() for v in values for m in v.split(",") if m.strip())


def config_from_args(args: argparse.Namespace, *, dataset: str | None) -> RunConfig:
    from aeval.prompts import GenerationSettings, PromptSettings
    from aeval.verify import VerifyLimits

    protocol: Protocol = getattr(args, "protocol", "default")  # argparse checks the choice
    if protocol != "default" and args.instruction_file is not None:
        raise ConfigError(
            f"--protocol {protocol} fixes the instruction: drop --instruction-file "
            f"{args.instruction_file}"
        )
    prompt = PromptSettings.from_files(args.instruction_file, args.system_file)
    generation = GenerationSettings(
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.generation_seed,
        max_tokens=args.max_tokens,
        max_completion_tokens=args.max_completion_tokens,
        reasoning_effort=_effort(getattr(args, "reasoning_effort", None)),
    )
    limits = (
        VerifyLimits.with_budget(args.check_timeout)
        if args.check_timeout is not None
        else VerifyLimits()
    )
    template_file = getattr(args, "prompt_template", None)
    template = None
    if template_file is not None:
        from aeval.prompts import read_text_file

        template = read_text_file(template_file, "prompt template")
    if dataset is not None and Path(dataset).exists():
        dataset = str(Path(dataset).resolve())  # so resume works from any directory
    return RunConfig(
        models=_models(args.model),
        trials=args.trials,
        dataset=dataset,
        dataset_revision=getattr(args, "dataset_revision", None),
        limit=args.limit,
        sample=args.sample,
        sample_seed=args.sample_seed,
        tier=args.tier,
        sample_ids=getattr(args, "sample_ids", None),
        prompt=prompt,
        generation=generation,
        limits=limits,
        poll=poll_settings(args),
        retry=retry_settings(args),
        retry_failed=args.retry_failed,
        out_dir=args.out,
        run_id=args.run_id,
        workers=args.workers,
        ray_address=ray_address(args),
        protocol=protocol,
        published=getattr(args, "published", True),
        published_binary=getattr(args, "published_binary", False),
        api=getattr(args, "api", "batch"),
        max_connections=getattr(args, "max_connections", DEFAULT_MAX_CONNECTIONS),
        request_timeout=getattr(args, "request_timeout", DEFAULT_REQUEST_TIMEOUT_S),
        endpoint=getattr(args, "endpoint", "chat"),
        prompt_template=template,
        extra_body=_extra_body(getattr(args, "extra_body", None)),
    )


def _effort(value: str | None) -> Effort | None:
    return None if value is None else check_effort(value.lower(), "--reasoning-effort")


def _extra_body(text: str | None) -> JsonObject | None:
    """``--extra-body``: a JSON object, or one line saying what is wrong with it."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"--extra-body is not JSON: {err}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"--extra-body must be a JSON object ({{...}}), got {text!r}")
    return value


def check_selection(config: RunConfig) -> int:
    """Load the rows ``config`` selects, before any directory exists; returns how many.

    :raises DatasetError: unreadable data, or a selection (tier, ids) that no row has.
    """
    return len(selected_questions(config))


def selected_questions(config: RunConfig) -> list[str]:
    from aeval.dataset import DEFAULT_DATASET, load_dataset

    frame = load_dataset(config.dataset or DEFAULT_DATASET, **config.row_selection())
    return frame.get_column("question").to_list()


def cost_lines(config: RunConfig, questions: list[str]) -> list[str]:
    """The estimated cost of ``config``, one line per model and a total."""
    from aeval.cost import CHARS_PER_TOKEN, PRICE_SOURCE, estimate_cost, usd
    from aeval.prompts import messages
    from aeval.store.results import previous_output_per_request

    prompts = [messages(q, config.prompt) for q in questions]
    batch = config.api == "batch"
    bound = config.generation.max_tokens or config.generation.max_completion_tokens
    estimates = [
        estimate_cost(
            model,
            prompts,
            trials=config.trials,
            max_output_tokens=bound,
            output_per_request=None
            if bound is not None
            else previous_output_per_request(config.out_dir, model),
            batch=batch,
        )
        for model in config.models
    ]
    lines = [
        f"estimated cost (Batch API prices, about half the synchronous price; prices from "
        f"{PRICE_SOURCE}):"
        if batch
        else "estimated cost (direct mode: full synchronous price, twice the Batch API's; "
        f"prices from {PRICE_SOURCE}):"
    ]
    lines += [f"  {e.describe()}" for e in estimates]
    known = [e.usd for e in estimates if e.usd is not None]
    if len(known) == len(estimates):
        exact = bound is not None and all(e.method == "tiktoken" for e in estimates)
        bound_word = "at most" if exact else "about"
        lines.append(f"  total: {bound_word} {usd(sum(known))}")
    elif known:
        lines.append(f"  total of the models with a known price: {usd(sum(known))}")
    if any(e.method == "characters" for e in estimates):
        lines.append(
            f"  (input tokens estimated at {CHARS_PER_TOKEN:g} characters per token: "
            "tiktoken or its encoding file is not available; "
            "pip install 'aeval[tokens]' with a network counts them exactly)"
        )
    return lines


def _dry_run(config: RunConfig, questions: list[str]) -> int:
    from aeval.batch.providers.registry import check_providers
    from aeval.engine import plan_run

    check_providers(config)  # what a provider would refuse, before the directory exists
    plan = plan_run(config)
    print(f"dry run: nothing was sent. Request files are in {RunLayout(plan.run_dir).requests_dir}")
    print(f"{plan.items} rows × {len(config.models)} model(s) × {config.trials} trial(s)")
    for rec in plan.shards:
        print(
            f"  {rec.model} trial {rec.trial} shard {rec.shard}: {rec.requests} requests, "
            f"{rec.bytes / 1e6:.2f} MB ({rec.input_path})"
        )
    print(
        f"total: {sum(r.requests for r in plan.shards)} requests, {plan.request_bytes / 1e6:.2f} MB"
    )
    for line in cost_lines(config, questions):
        print(line)
    print(f"to send it (and pay for it): python -m aeval resume --submit {plan.run_dir}")
    return EXIT_FINISHED


def main(args: argparse.Namespace) -> int:
    from aeval.engine import Run

    if args.resume is not None:
        from aeval.commands.resume import resume_run

        return resume_run(args.resume, args)
    api = getattr(args, "api", "batch")
    credentials = None if args.offline else command_credentials(_models(args.model), api)
    offline = credentials is None and not args.dry_run
    dataset = args.dataset
    if dataset is None and (offline or (args.dry_run and credentials is None)):
        from aeval.dataset import demo_dataset_path

        dataset = str(demo_dataset_path())
    config = config_from_args(args, dataset=dataset)
    questions = selected_questions(config)  # every input error before a directory exists
    if args.dry_run:
        return _dry_run(config, questions)
    if not offline:
        if display_mode(args) != "quiet":
            for line in cost_lines(config, questions):
                print(line, file=sys.stderr)
        config = config.with_credentials(credentials)
        return execute(lambda subs: Run(config, subscribers=subs), args)
    # The run id is fixed before the server starts: its state goes inside the run directory.
    config = dataclasses.replace(config, run_id=config.run_id or new_run_id())
    run_dir = Path(config.out_dir) / str(config.run_id)
    if RunLayout(run_dir).manifest.exists():  # before its server touches the run's state
        raise RunDirError(
            f"{run_dir} already holds a run: resume it with "
            f"'python -m aeval resume {run_dir}' or pick another --run-id"
        )
    assert config.dataset is not None  # offline: --dataset, else the demo set (above)
    with offline_server(config.dataset, run_dir) as creds:
        config = config.with_credentials(creds)
        synthetic = offline_responders()
        return execute(
            lambda subs: Run(config, subscribers=subs, offline=True, synthetic=synthetic),
            args,
            offline=True,
            direct=config.api == "direct",
        )
