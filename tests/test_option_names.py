"""One name per input (issue 43): every command spells an input the same way, and an old name
still parses, for one release, to the same value, with a note on stderr.

The registry below is the contract: a concept, the Python names commands give it, its one
visible spelling and the old names kept as hidden aliases.  A concept not listed is checked
too: whatever its Python name, every command must show it under one spelling.
"""

from __future__ import annotations

import re

import click
import pytest

from breakeven.cli import cli
from breakeven.cli.params import Renamed, renamed_note
from tests.cli_checks import run_cli

# concept -> (the Python names commands give it, its one visible spelling, its old names)
CANONICAL = {
    "num_spec_tokens": (
        ("k", "num_spec_tokens"),
        "-k/--num-spec-tokens",
        ("--draft-tokens", "--steps"),
    ),
    "baseline_tok_s": (("baseline_tok_s",), "--baseline-tok-s", ("--baseline",)),
    "cost_curve": (("cost_curve", "verify_curve"), "--cost-curve", ("--verify-curve",)),
    "spec_method": (("spec_method", "method"), "--spec-method", ("--method",)),
    "spec_topk": (("spec_topk", "topk"), "--topk", ()),
    "verify_ms": (("verify_ms",), "--verify-ms", ()),
    "draft_ms": (("draft_ms",), "--draft-ms", ()),
    "draft_step_ms": (("draft_step_ms",), "--draft-step-ms", ()),
    "cycle_ms": (("cycle_ms",), "--cycle-ms", ()),
    "overhead_ms": (("overhead_ms",), "--overhead-ms", ()),
    "step_ms": (("step_ms",), "--step-ms", ()),
    "accept_len": (("accept_len",), "--accept-len", ()),
    "fit_file": (("fit_file",), "--fit-file", ()),
    "out": (("out",), "--out", ()),
    "tolerance": (("tolerance",), "--tolerance", ()),
    "as_json": (("as_json",), "--json", ()),
    "output_format": (("output_format",), "--format", ()),
}
CONCEPT_OF = {name: concept for concept, (names, _, _) in CANONICAL.items() for name in names}

ONE_NAME_TWO_CONCEPTS = {
    # ingest's --format names what it reads (a log or export format); every other command's
    # names what it prints.  Kept: ingest prints only text or --json, so the two never meet.
    "--format": {"format", "output_format"},
}


def _commands(group=cli, path=()):
    """Every command of the CLI, as (its words, the command)."""
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name), command


def _options():
    """Every option of every command: (command words, the option)."""
    for words, command in _commands():
        for param in command.params:
            if isinstance(param, click.Option):
                yield " ".join(words), param


def _visible(option):
    return () if option.hidden else (*option.opts, *option.secondary_opts)


def _spelling(option):
    return "/".join(_visible(option))


OPTIONS = list(_options())
OLD_NAMES = {old for _, _, olds in CANONICAL.values() for old in olds}


def test_every_concept_shows_one_name_in_every_command():
    spellings: dict[str, dict[str, list[str]]] = {}
    for command, option in OPTIONS:
        if option.hidden:
            continue
        concept = CONCEPT_OF.get(option.name, option.name)
        spellings.setdefault(concept, {}).setdefault(_spelling(option), []).append(command)
    several = {c: s for c, s in spellings.items() if len(s) > 1}
    assert not several, f"one concept, several visible names: {several}"


def test_the_registered_concepts_show_their_canonical_name():
    seen = set()
    for command, option in OPTIONS:
        concept = CONCEPT_OF.get(option.name)
        if concept is None:
            continue
        seen.add(concept)
        assert _spelling(option) == CANONICAL[concept][1], (command, option.name)
    assert seen == set(CANONICAL), f"registered but in no command: {set(CANONICAL) - seen}"


def test_a_visible_name_means_one_concept():
    concepts: dict[str, set[str]] = {}
    for _, option in OPTIONS:
        for name in _visible(option):
            concepts.setdefault(name, set()).add(CONCEPT_OF.get(option.name, option.name))
    shared = {n: c for n, c in concepts.items() if len(c) > 1}
    expected = {n: {CONCEPT_OF.get(d, d) for d in ds} for n, ds in ONE_NAME_TWO_CONCEPTS.items()}
    assert shared == expected


def test_no_command_shows_an_old_name_and_each_is_a_hidden_alias_of_its_concept():
    aliases = set()
    for command, option in OPTIONS:
        assert not OLD_NAMES & set(_visible(option)), (command, _spelling(option))
        olds = getattr(option, "old_names", ())
        if olds:
            concept = CONCEPT_OF[option.name]
            assert set(olds) <= set(CANONICAL[concept][2]), (command, olds)
            aliases.update(olds)
    assert aliases == OLD_NAMES, f"an old name no command keeps: {OLD_NAMES - aliases}"


def test_an_old_name_never_hides_another_option():
    for words, command in _commands():
        names = {n for p in command.params if isinstance(p, click.Option) for n in p.opts}
        names |= {
            n for p in command.params if isinstance(p, click.Option) for n in p.secondary_opts
        }
        for param in command.params:
            for old in getattr(param, "old_names", ()):
                assert old not in names, (words, old)


@pytest.mark.parametrize(
    ("command", "option"),
    [(c, o) for c, o in OPTIONS if isinstance(o, Renamed)],
    ids=lambda x: x if isinstance(x, str) else x.name,
)
def test_each_old_name_parses_to_the_same_value_and_prints_the_note(command, option, capsys):
    ctx = click.Context(cli, info_name="breakeven", **cli.context_settings)
    found = cli
    for word in command.split():  # contexts as the command line makes them (help names)
        found = found.get_command(ctx, word)
        ctx = click.Context(found, info_name=word, parent=ctx, **found.context_settings)
    for old in option.old_names:
        parsed = {}
        for name in (option.canonical, old):
            parser = found.make_parser(ctx)
            opts, _, _ = parser.parse_args([name, "3"])
            parsed[name] = opts[option.name]
        note = capsys.readouterr().err
        assert parsed[old] == parsed[option.canonical], (command, old)
        assert note == renamed_note(old, option.canonical) + "\n"
        assert note.startswith(f"Note: {old} is now {option.canonical};")


def test_a_command_with_old_names_answers_as_with_the_new_ones():
    costs = ["--verify-ms", "28.7", "--draft-ms", "1.2", "--accept-len", "2.1"]
    new = run_cli(["predict", "--baseline-tok-s", "62.9", "-k", "6", *costs])
    old = run_cli(["predict", "--baseline", "62.9", "--draft-tokens", "6", *costs])
    steps = run_cli(["predict", "--baseline=62.9", "--steps", "6", *costs])
    assert new.exit_code == old.exit_code == steps.exit_code == 0, old.output
    assert new.stdout == old.stdout == steps.stdout
    assert new.stderr == ""
    assert old.stderr.splitlines() == [
        renamed_note("--baseline", "--baseline-tok-s"),
        renamed_note("--draft-tokens", "--num-spec-tokens"),
    ]


def test_an_error_names_the_canonical_flag_whatever_name_was_typed():
    typed = ["--baseline", "62.9", "--verify-ms", "28.7", "--accept-len", "9"]
    r = run_cli(["predict", *typed, "--draft-tokens", "2"])
    assert r.exit_code == 2
    last = r.stderr.rstrip("\n").rsplit("\n", 1)[-1]
    assert "-k/--num-spec-tokens" in last and "--draft-tokens" not in last, last


def test_help_shows_no_old_name():
    """Each option's line in --help, and the command's text and examples, name no old name
    (read from the commands, not by running --help, which caches each command's help option
    as the calling context spells it)."""
    for words, command in _commands():
        ctx = click.Context(command, info_name=words[-1])
        records = [p.get_help_record(ctx) for p in command.params if isinstance(p, click.Option)]
        texts = [" ".join(r) for r in records if r]
        texts += [command.help or "", command.epilog or "", *getattr(command, "examples", [])]
        for text in texts:
            for old in OLD_NAMES:
                assert not re.search(rf"(?<![-\w]){old}(?![-\w])", text), (words, old, text)


@pytest.mark.parametrize(
    ("args", "offered"),
    [
        (["predict", "--baselin", "5"], "--baseline-tok-s"),
        (["sweep", "--metho", "x"], "--spec-method"),
    ],
)
def test_a_mistyped_flag_is_offered_the_new_name_never_an_old_one(args, offered):
    r = run_cli(args)
    assert r.exit_code == 2 and offered in r.stderr, r.output
    assert not any(f"'{old}'" in r.stderr for old in OLD_NAMES), r.stderr
