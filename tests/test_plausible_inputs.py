"""Plausibility before arithmetic (issue 38, item 1): typed costs and acceptance no engine could
have measured are refused in one line naming the value, its unit and the likely cause; possible
but suspicious ones are flagged, in text (the headline says so) and in JSON.  File readers refuse
an acceptance_rate written as a percent, naming the file and line."""

import json

import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import breakeven as be
from breakeven import BreakevenError
from breakeven.core.quantities import DEFAULT_TOLERANCE
from breakeven.fitting.fit import fit
from breakeven.measurements.plausibility import TYPED_FLAGS, UNIT_SLIP
from tests.cli_checks import invoke, one_line_exit_2

CURVE = "data/llama3_8b_decode_curve.csv"  # 7.37 ms at 1 token, 11.84 ms at 128


class TestCycleAgainstTheStep:
    def test_a_cycle_typed_in_seconds_is_refused_with_the_unit_it_was_meant_in(self):
        # The case study's 29.9 ms cycle typed as 0.0299 (seconds) printed "pays: 1116.600x".
        r = invoke(
            "predict", "--baseline-tok-s", 62.9, "--cycle-ms", 0.0299, "--accept-len", 2.1, "-k", 6
        )
        one_line_exit_2(
            r,
            "--cycle-ms is 0.0299 ms, 532x shorter than the 15.898 ms plain step of --baseline-tok-s",
            "62.9 tok/s",
            "did you mean 29.9 ms?",
        )
        assert "1116" not in r.output

    def test_a_verify_typed_in_seconds_is_refused_with_a_typed_step(self):
        one_line_exit_2(
            invoke("predict", "--step-ms", 15.9, "--verify-ms", 0.0287, "--accept-len", 2.1),
            "--verify-ms is 0.0287 ms",
            "--step-ms = 15.9 ms",
            "did you mean 28.7 ms?",
        )

    def test_the_library_refuses_with_the_same_sentence_in_python_names(self):
        with pytest.raises(BreakevenError, match=r"^cycle_ms is 0.0299 ms, 532x shorter") as e:
            be.predict(baseline_tok_s=62.9, cycle_ms=0.0299, accept_len=2.1, k=6)
        assert isinstance(e.value, ValueError)
        cli = invoke("predict", "--baseline-tok-s", 62.9, "--cycle-ms", 0.0299, "--accept-len", 2.1)
        spelled = (
            str(e.value)
            .replace("cycle_ms", "--cycle-ms")
            .replace("baseline_tok_s", "--baseline-tok-s")
        )
        assert cli.stderr.strip() == f"Error: {spelled}"

    def test_a_speedup_above_k_plus_1_is_refused(self):
        # 5 ms against a 15.898 ms step: 6.68x at k = 2, where a cycle emits at most 3 tokens.
        one_line_exit_2(
            invoke(
                "predict", "--baseline-tok-s", 62.9, "--cycle-ms", 5, "--accept-len", 2.1, "-k", 2
            ),
            "--cycle-ms and --baseline-tok-s: the speedup 6.677x at k = 2 is above k + 1 = 3",
            "the cycle 5 ms is 3.18x shorter than the step 15.898 ms",
        )
        with pytest.raises(BreakevenError, match=r"above k \+ 1 = 3"):
            be.predict(baseline_tok_s=62.9, cycle_ms=5, accept_len=2.1, k=2)

    def test_a_cycle_shorter_than_a_step_is_flagged_in_the_headline_and_in_json(self):
        args = ("predict", "--baseline-tok-s", 62.9, "--cycle-ms", 12, "--accept-len", 2.1, "-k", 2)
        text = invoke(*args)
        assert text.exit_code == 0, text.output
        lines = text.output.splitlines()
        assert lines[0].startswith("Speculation pays (flagged): 2.782x")
        at = lines.index("Flagged:")  # under the headline, before the table
        assert lines[at + 1].startswith("- cycle_below_step: cycle_ms 12 ms is 1.32x shorter")
        assert at < lines.index("Inputs:")
        data = json.loads(invoke(*args, "--json").output)
        (flag,) = data["flags"]
        assert flag["code"] == "cycle_below_step" and "15.898 ms plain step" in flag["message"]

    def test_without_k_a_speedup_above_accept_len_is_flagged(self):
        p = be.predict(step_ms=20, verify_ms=15, accept_len=1.5)
        assert p.speedup == pytest.approx(2.0) and p.speedup > p.accept_len
        assert [f.code for f in p.flags] == ["cycle_below_step"]
        assert p.report().startswith("Speculation pays (flagged): 2.000x")

    def test_a_cost_a_hundred_steps_long_is_flagged(self):
        p = be.predict(step_ms=15, cycle_ms=29900, accept_len=2.1)
        (flag,) = p.flags
        assert flag.code == "times_far_apart"
        assert "1993x" in flag.message and "in microseconds is 29.9 ms" in flag.message
        assert p.to_dict()["flags"] == [flag._asdict()]

    def test_plausible_inputs_carry_no_flags(self):
        p = be.predict(baseline_tok_s=62.9, verify_ms=28.7, draft_ms=1.2, accept_len=2.1, k=6)
        assert p.flags == () and "flags" not in p.to_dict()
        assert "Flagged" not in p.report()
        # Leviathan's cycle, k * c + 1 steps, is never shorter than a step.
        assert be.predict(step_ms=10, cost_ratio=0, alpha=0.9, k=4).flags == ()

    def test_a_cycle_within_the_tolerance_of_the_step_is_not_flagged(self):
        step = 20.0
        assert be.predict(step_ms=step, cycle_ms=step * (1 - DEFAULT_TOLERANCE / 2)).flags == ()

    def test_every_flag_code_is_described(self):
        p = be.predict(step_ms=15, cycle_ms=29900, accept_len=2.1)
        q = be.predict(step_ms=20, cycle_ms=15, accept_len=1.5)
        assert {f.code for f in p.flags + q.flags} <= set(TYPED_FLAGS)


class TestAcceptance:
    @pytest.mark.parametrize(
        "command", [["predict", "--baseline-tok-s", 62.9, "--verify-ms", 28.7]]
    )
    def test_alpha_as_a_percent(self, command):
        one_line_exit_2(
            invoke(*command, "--alpha", 86.4, "-k", 3),
            "--alpha: got 86.4, expected a probability in [0, 1]: a percent? give 0.864",
        )

    def test_alpha_as_a_percent_in_optimize(self):
        one_line_exit_2(
            invoke("optimize", "--alpha", 86.4, "--cost-ratio", 0.05), "a percent? give 0.864"
        )
        with pytest.raises(BreakevenError, match=r"a percent\? give 0.864"):
            be.predict(alpha=86.4, k=3)

    def test_a_per_token_rate_given_as_accept_len(self):
        one_line_exit_2(
            invoke("predict", "--baseline-tok-s", 62.9, "--verify-ms", 28.7, "--accept-len", 0.8),
            "--accept-len: got 0.8",
            "it counts the bonus token, so it is at least 1",
            "give it as --alpha",
        )
        with pytest.raises(BreakevenError, match=r"per-token acceptance rate\? give it as alpha"):
            be.predict(accept_len=0.8)

    def test_accept_len_above_k_plus_1(self):
        one_line_exit_2(
            invoke(
                "predict", "--baseline-tok-s", 62.9, "--verify-ms", 28.7, "--accept-len", 9, "-k", 3
            ),
            "--accept-len: got 9, expected at most k + 1 = 4",
        )


def _measurements(tmp_path, column, value):
    path = tmp_path / "runs.csv"
    path.write_text(
        f"model,hardware,concurrency,num_spec_tokens,tok_s,{column}\n"
        "m,h,1,0,60,\n"
        f"m,h,1,3,90,{value}\n"
    )
    return path


class TestFiles:
    @pytest.mark.parametrize("command", ["fit", "check"])
    def test_an_acceptance_rate_written_as_a_percent_is_refused_with_its_line(
        self, tmp_path, command
    ):
        # Before, fit left the row out unsaid and then said no group has a baseline.
        path = _measurements(tmp_path, "acceptance_rate", 86.4)
        one_line_exit_2(
            invoke(command, path),
            f"{path}, line 3: acceptance_rate is 86.4",
            "a percent? 86.4 reads as 0.864",
        )

    @pytest.mark.parametrize("command", ["fit", "check"])
    def test_a_rate_in_the_accept_len_column_is_refused(self, tmp_path, command):
        path = _measurements(tmp_path, "accept_len", 0.8)
        one_line_exit_2(
            invoke(command, path),
            f"{path}, line 3: accept_len is 0.8, expected at least 1 [tokens/cycle]",
            "write it as acceptance_rate",
        )

    def test_a_dataframe_s_impossible_rate_is_left_out_with_a_note(self):
        rows = pd.DataFrame(
            {
                "model": ["m", "m"],
                "hardware": ["h", "h"],
                "concurrency": [1, 1],
                "num_spec_tokens": [0, 3],
                "tok_s": [60.0, 90.0],
                "acceptance_rate": [None, 86.4],
                "line": [2, 3],
            }
        )
        (note,) = [n for n in fit(rows).notes if n.startswith("implausible")]
        assert "(line 3): acceptance_rate is 86.4" in note and "reads as 0.864" in note
        assert rows["acceptance_rate"].iloc[1] == 86.4  # the caller's rows are not changed


class TestOptimizeAndBatch:
    def test_optimize_refuses_a_verify_typed_in_seconds(self):
        one_line_exit_2(
            invoke(
                "optimize",
                "--baseline-tok-s",
                62.9,
                "--verify-ms",
                0.0287,
                "--accept-len-by-k",
                "1.6,1.9",
            ),
            "--verify-ms is 0.0287 ms, 554x shorter",
            "did you mean 28.7 ms?",
        )

    def test_optimize_refuses_a_speedup_above_k_plus_1(self):
        one_line_exit_2(
            invoke(
                "optimize",
                "--baseline-tok-s",
                62.9,
                "--verify-ms",
                5,
                "--accept-len-by-k",
                "1.6,1.9",
            ),
            "--verify-ms and --baseline-tok-s: the speedup 5.087x at k = 1 is above k + 1 = 2",
        )

    def test_optimize_flags_a_verify_shorter_than_the_step(self):
        r = be.optimize(baseline_tok_s=62.9, verify_ms=14, accept_len_by_k=[1.6, 1.9])
        assert "flagged (cycle_below_step): verify_ms 14 ms" in r.note
        assert "flagged (cycle_below_step)" in r.report()

    def test_batch_flags_a_curve_that_falls_as_tokens_grow(self, tmp_path):
        curve = tmp_path / "curve.csv"
        curve.write_text("tokens,ms\n1,10\n8,6\n64,14\n")
        r = invoke("batch", "--cost-curve", curve, "--accept-len", 2.1, "-k", 3, "--json")
        assert r.exit_code == 0, r.output
        (note,) = json.loads(r.output)["notes"]
        assert note.startswith("flagged (curve_falls): cost_curve")
        assert "falls from 10 ms at 1 tokens to 6 ms at 8" in note
        text = invoke("batch", "--cost-curve", curve, "--accept-len", 2.1, "-k", 3).output
        assert text.splitlines()[1].startswith("Flagged (curve_falls)")

    def test_batch_flags_drafting_a_hundred_steps_long(self):
        r = invoke("batch", "--cost-curve", CURVE, "--accept-len", 2.1, "-k", 3, "--draft-ms", 1500)
        assert r.exit_code == 0 and "Flagged (times_far_apart): draft_ms 1500 ms" in r.output

    def test_a_rising_curve_and_plausible_costs_are_not_flagged(self):
        r = invoke("batch", "--cost-curve", CURVE, "--accept-len", 2.1, "-k", 3, "--json")
        assert json.loads(r.output)["notes"] == []
        o = be.optimize(baseline_tok_s=62.9, verify_ms=28.7, accept_len_by_k=[1.6, 1.9])
        assert "flagged" not in o.note


@settings(max_examples=100, deadline=None)
@given(
    step=st.floats(0.01, 1000),
    cycle=st.floats(0.01, 1000),
    k=st.integers(1, 16),
    share=st.floats(0, 1),
)
# A cycle 1/1.0512 of the step: within 1 - 5% of it, yet a speedup 5.1% above accept_len.
@example(step=636.0, cycle=605.0, k=1, share=0.0)
def test_a_printed_speedup_is_at_most_k_plus_1_or_flagged(step, cycle, k, share):
    accept_len = 1 + share * k  # any accept_len predict takes at this k: 1 to k + 1
    args = ["predict", "--step-ms", step, "--cycle-ms", cycle, "--accept-len", accept_len]
    r = invoke(*args, "-k", k, "--json")
    if r.exit_code == 2:  # refused, in one line
        assert r.stderr.count("\n") == 1 and "Traceback" not in r.output
        assert step / cycle > 1 + DEFAULT_TOLERANCE or step / cycle >= UNIT_SLIP
        return
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    if data["speedup"] > (k + 1) * (1 + DEFAULT_TOLERANCE) or data["speedup"] > accept_len * (
        1 + DEFAULT_TOLERANCE
    ):
        assert data["flags"], data
        text = invoke(*args, "-k", k).output
        assert text.startswith("Speculation pays (flagged): ")
    assert data["speedup"] <= (k + 1) * (1 + DEFAULT_TOLERANCE)
