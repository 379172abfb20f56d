"""Refresh aeval's copy of litellm's reasoning flags (aeval/data/litellm_reasoning.json).

Which reasoning settings each model takes comes from litellm's model map
(``model_prices_and_context_window_backup.json`` in the litellm wheel; MIT, Berri AI,
licence in aeval/data/LICENSE-litellm). The map is 3.4 MB and litellm 40+ MB with many
dependencies, so aeval ships only the reasoning fields of each chat model, and this
script rebuilds them from a wheel:

    pip download litellm --no-deps -d /tmp/litellm-wheel
    python tools/refresh_reasoning_map.py /tmp/litellm-wheel/litellm-*.whl

(or give the JSON file itself). It rewrites the data file and the licence beside it,
and prints how many models changed; tests/test_model_reasoning.py then holds the
shipped copy's flags to what aeval reads from them.
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path
from typing import Any

MAP = "litellm/model_prices_and_context_window_backup.json"
OUT = Path(__file__).resolve().parent.parent / "aeval" / "data" / "litellm_reasoning.json"
LICENCE = OUT.with_name("LICENSE-litellm")
# The fields aeval reads (aeval.batch.providers.model_reasoning); the rest of an entry
# (prices, context windows) is not needed here: prices come from genai-prices.
FIELDS = (
    "litellm_provider",
    "mode",
    "supports_reasoning",
    "reasoning_effort_levels",
    "supports_none_reasoning_effort",
    "supports_minimal_reasoning_effort",
    "supports_low_reasoning_effort",
    "supports_xhigh_reasoning_effort",
    "supports_max_reasoning_effort",
    "thinking_always_on",
)


def read(source: Path) -> tuple[dict[str, Any], str, str]:
    """(the model map, its licence text, the litellm version) from a wheel or the JSON."""
    if source.suffix == ".whl":
        with zipfile.ZipFile(source) as wheel:
            data = json.loads(wheel.read(MAP))
            licences = [n for n in wheel.namelist() if n.endswith("licenses/LICENSE")]
            licence = wheel.read(licences[0]).decode() if licences else ""
        version = source.name.split("-")[1]
        return data, licence, version
    return json.loads(source.read_text()), LICENCE.read_text(), "unknown"


# litellm's provider names of the APIs aeval reaches (its key prefixes: ``gemini/``,
# ``groq/``, ``together_ai/``, ``mistral/``, ``xai/``, ``azure/``; OpenAI's and
# Anthropic's models are listed bare), and the clouds' (Bedrock, Vertex AI).
PROVIDERS = ("openai", "anthropic", "gemini", "groq", "together_ai", "mistral", "xai",
             "azure", "bedrock", "bedrock_converse", "vertex_ai")  # fmt: skip


def shrink(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, entry in sorted(data.items()):
        if not isinstance(entry, dict) or entry.get("mode") not in (None, "chat", "responses"):
            continue
        kept = {k: entry[k] for k in FIELDS if k in entry and k != "mode"}
        provider = str(kept.get("litellm_provider") or "")
        if provider in PROVIDERS or provider.startswith("vertex_ai"):
            out[name] = kept
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    data, licence, version = read(Path(argv[0]))
    models = shrink(data)
    old = json.loads(OUT.read_text())["models"] if OUT.exists() else {}
    changed = sum(1 for k in set(old) | set(models) if old.get(k) != models.get(k))
    doc = {
        "source": f"litellm {version}, {MAP} (MIT, Berri AI: LICENSE-litellm); only the "
        "reasoning fields of chat models, by tools/refresh_reasoning_map.py",
        "models": models,
    }
    # One model a line: a refresh's diff shows which models changed.
    lines = [f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in models.items()]
    head = '{"source": ' + json.dumps(doc["source"]) + ',\n"models": {\n'
    text = head + ",\n".join(lines) + "\n}}\n"
    OUT.write_text(text, encoding="utf-8")
    if licence:
        LICENCE.write_text(licence, encoding="utf-8")
    print(f"{OUT}: {len(models)} models from litellm {version} ({changed} changed)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
