"""``python -m aeval run``: run models on the benchmark through a batch API.

With no API key in the environment this is the offline demo: a local batch
server starts in the background with synthetic models, and the run goes to it
exactly as it would go to OpenAI (the engine only sees a base URL and a key).

Every input is checked before a run directory is created: the flags while
they are parsed, then the rows they select (a ``--tier`` no row has, a
``--sample-id`` no row has), which are loaded once up front. A paid run and a
``--dry-run`` then print their estimated cost (:mod:`aeval.cost`).

Its arguments are in :mod:`aeval.commands.run_args`, which ``--help`` loads
without this module's engine and server.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import sys
from pathlib import Path

from aeval.batch.providers.registry import check_providers
from aeval.commands.drive import (
    EXIT_FINISHED,
    check_cloud_storage,
    cloud_environment,
    command_credentials,
    poll_settings,
    ray_address,
    retry_settings,
)
from aeval.commands.execute import display_mode, execute, offline_responders, offline_server
from aeval.commands.resume import resume_run
from aeval.config import (
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_REQUEST_TIMEOUT_S,
    MISSION_MODELS,
    RunConfig,
)
from aeval.cost import (
    CHARS_PER_TOKEN,
    PRICE_SOURCE,
    estimate_cost,
    estimate_rounds,
    token_counter,
    usd,
)
from aeval.dataset import DEFAULT_DATASET, demo_dataset_path, load_dataset
from aeval.engine import Run, plan_run
from aeval.errors import ConfigError, RunDirError
from aeval.feedback import DEFAULT_FEEDBACK_TEMPLATE
from aeval.json_values import JsonObject
from aeval.prompts import GenerationSettings, PromptSettings, Protocol, messages, read_text_file
from aeval.reasoning import Effort, check_effort
from aeval.store import RunLayout, new_run_id
from aeval.store.results import previous_output_per_request
from aeval.verify import VerifyLimits


def _models(values: list[str] | None) -> tuple[str, ...]:
    if not values:
        return MISSION_MODELS
    return tuple(m.strip() for v in values for m in v.split(",") if m.strip())


def config_from_args(args: argparse.Namespace, *, dataset: str | None) -> RunConfig:
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
        rounds=getattr(args, "rounds", 1),
        feedback=getattr(args, "feedback", None),
        feedback_template=_feedback_template(getattr(args, "feedback_file", None)),
    )


def _feedback_template(path: Path | None) -> str | None:
    """``--feedback-file``: the template's exact text (checked by RunConfig)."""
    return None if path is None else read_text_file(path, "feedback template")


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
    frame = load_dataset(config.dataset or DEFAULT_DATASET, **config.row_selection())
    return frame.get_column("question").to_list()


def cost_lines(config: RunConfig, questions: list[str]) -> list[str]:
    """The estimated cost of ``config``, one line per model and a total."""
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
    if config.rounds > 1:
        # The lines above are the first round's; every later round may ask each item again.
        lines.append(
            f"  the first round above; all {config.rounds} rounds at most (every item "
            "wrong in every round, each earlier answer at the output bound):"
        )
        estimates = [
            estimate_rounds(e, config.rounds, functools.partial(feedback_tokens, config, e.model))
            for e in estimates
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


# The room the cost bound gives each field of a feedback message: a reason quotes a
# solver's message (the verifier cuts a worker's to 300 characters,
# aeval.verify.worker_process) and a counterexample names every declared variable with
# its value (~20 characters each: 2,000 covers a hundred variables).
FEEDBACK_BOUND_CHARS = 2_000


def feedback_tokens(config: RunConfig, model: str) -> int:
    """Tokens of the longest feedback message of ``config``'s template and level: every
    field at its longest (:data:`FEEDBACK_BOUND_CHARS` characters of reason and of
    counterexample), counted with ``model``'s tokenizer."""
    template = config.feedback_template or DEFAULT_FEEDBACK_TEMPLATE
    filler = "x" * FEEDBACK_BOUND_CHARS
    text = template.format_map({"verdict": "Your answer is not correct.", "reason": filler,
                                "counterexample": filler})  # fmt: skip
    count, _ = token_counter(model)
    return count(text)


def _dry_run(config: RunConfig, questions: list[str]) -> int:
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
    if args.resume is not None:
        return resume_run(args.resume, args)
    api = getattr(args, "api", "batch")
    env = cloud_environment(args)
    credentials = None if args.offline else command_credentials(_models(args.model), api, env)
    check_cloud_storage(credentials)
    offline = credentials is None and not args.dry_run
    dataset = args.dataset
    if dataset is None and (offline or (args.dry_run and credentials is None)):
        dataset = str(demo_dataset_path())
    config = config_from_args(args, dataset=dataset)
    questions = selected_questions(config)  # every input error before a directory exists
    for note in check_providers(config):  # refusals raise; an unchecked setting is said
        print(note, file=sys.stderr)
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
    with offline_server(config.dataset, run_dir, models=config.models) as creds:
        config = config.with_credentials(creds)
        synthetic = offline_responders()
        return execute(
            lambda subs: Run(config, subscribers=subs, offline=True, synthetic=synthetic),
            args,
            offline=True,
            direct=config.api == "direct",
            models=config.models,
        )
