"""Models are priced and compared by what they name: provider prefixes and release dates aside."""

from __future__ import annotations

import pytest

from pytest_swe_arena.spend.prices import model_key, price_for, price_for_served, same_model
from pytest_swe_arena.spend.usage_file import read_usage_report

GPT4O = {"input": 2.5, "output": 10.0}
AZURE = {"input": 2.75, "output": 11.0}


@pytest.mark.parametrize(("name", "key"), [
    ("openai/gpt-4o", "gpt-4o"), ("gpt-4o-2024-08-06", "gpt-4o"), ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
    ("anthropic/claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
    ("openrouter/google/Gemini-2.5-Pro", "gemini-2.5-pro"),
    ("gpt-5.5", "gpt-5.5"), ("o3-mini", "o3-mini"),
])
def test_model_key_drops_the_provider_and_the_release_date(name, key):
    assert model_key(name) == key


def test_a_dated_served_model_is_priced_by_its_undated_entry():
    prices = {"openai/gpt-4o": GPT4O}
    assert price_for(prices, "gpt-4o-2024-08-06") == GPT4O
    assert price_for(prices, "gpt-4o") == GPT4O
    assert price_for(prices, "gpt-4o-mini") is None  # another model, not a prefix match


def test_the_own_providers_entry_wins_and_disagreeing_entries_price_nothing():
    prices = {"openai/gpt-4o": GPT4O, "azure/gpt-4o": AZURE}
    assert price_for(prices, "azure/gpt-4o-2024-08-06") == AZURE
    assert price_for(prices, "gpt-4o") is None  # which one? unknown, never a guess
    assert price_for({**prices, "gpt-4o": GPT4O}, "gpt-4o") == GPT4O  # the exact name


def test_a_served_model_is_priced_by_its_name_then_by_the_asked_model():
    prices = {"lab/asked": GPT4O, "lab/served": AZURE}
    assert price_for_served(prices, "lab/served", "lab/asked") == AZURE
    assert price_for_served(prices, "strange-alias", "lab/asked") == GPT4O


def test_the_tripwire_compares_models_the_same_way():
    assert same_model("openai/scripted", "scripted")  # mini's served name vs the asked one
    assert same_model("anthropic/claude-sonnet-4-5", "claude-sonnet-4-5-20250929")
    assert not same_model("openai/gpt-4o", "gpt-4o-mini")


def test_a_usage_file_without_reasoning_or_cache_fields_is_known(tmp_path):
    path = tmp_path / "usage.json"
    path.write_text('{"input_tokens": 100, "output_tokens": 20}')
    report = read_usage_report(path)
    assert report.usage.total_tokens == 120 and report.usage.cache_read_tokens == 0 and not report.problems
    path.write_text('{"output_tokens": 20}')
    assert read_usage_report(path).usage.total_tokens is None  # no input count: unknown


def test_a_usage_file_with_a_models_map_sums_them_and_names_the_served_model(tmp_path):
    path = tmp_path / "usage.json"
    path.write_text('{"models": {"lab/a": {"input_tokens": 10, "output_tokens": 1}, '
                    '"lab/b": {"input_tokens": 5, "output_tokens": "x"}}, "input_tokens": 3}')
    report = read_usage_report(path)
    assert report.models["lab/a"].total_tokens == 11 and report.models["lab/b"].output_tokens is None
    assert report.usage.input_tokens == 15 and report.usage.output_tokens is None and report.served is None
    assert report.problems == ["usage.json.models[lab/b].output_tokens: 'x' is not a whole number",
                               "usage.json: input_tokens given beside 'models': the models' sum is used"]
