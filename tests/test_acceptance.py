"""Acceptance: alpha <-> accept_len (bonus token included) and per-position rates."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from breakeven import (
    BreakevenError,
    accept_len_from_alpha,
    accept_len_from_per_position,
    alpha_from_accept_len,
)

alphas = st.floats(0.0, 1.0)
ks = st.integers(1, 32)


@pytest.mark.parametrize(
    ("alpha", "k", "tau"),
    [
        # (1 - a^(k+1)) / (1 - a), by hand
        (0.8, 4, (1 - 0.8**5) / 0.2),  # 3.3616
        (0.5, 1, 1.5),
        (0.5, 2, 1.75),
        (0.6, 2, 1.96),
        (0.0, 7, 1.0),  # nothing accepted: only the bonus token
        (1.0, 7, 8.0),  # everything accepted: k + 1
    ],
)
def test_accept_len_known_values(alpha, k, tau):
    assert accept_len_from_alpha(alpha, k) == pytest.approx(tau, rel=1e-14)


def test_accept_len_keeps_precision_next_to_alpha_one():
    # The textbook form cancels here; the sum 1 + a + ... + a^k does not.
    a, k = 1 - 1e-12, 4
    exact = math.fsum(a**i for i in range(k + 1))
    assert accept_len_from_alpha(a, k) == pytest.approx(exact, rel=1e-12)


@given(alphas, ks)
def test_accept_len_lies_between_one_and_k_plus_one(alpha, k):
    tau = accept_len_from_alpha(alpha, k)
    assert 1.0 <= tau <= k + 1


@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), ks)
def test_accept_len_rises_with_alpha(a, b, k):
    lo, hi = sorted((a, b))
    assert accept_len_from_alpha(lo, k) <= accept_len_from_alpha(hi, k)


@given(alphas, ks)
def test_alpha_round_trips_through_accept_len(alpha, k):
    assert alpha_from_accept_len(accept_len_from_alpha(alpha, k), k) == pytest.approx(
        alpha, abs=1e-9
    )


@given(st.floats(0.0, 1.0), ks)
def test_accept_len_round_trips_through_alpha(fraction, k):
    tau = 1 + fraction * k
    assert accept_len_from_alpha(alpha_from_accept_len(tau, k), k) == pytest.approx(tau, rel=1e-12)


def test_alpha_from_accept_len_at_the_ends():
    assert alpha_from_accept_len(1.0, 5) == 0.0
    assert alpha_from_accept_len(6.0, 5) == 1.0


def test_alpha_from_accept_len_case_study():
    # EAGLE-3 on Kimi-K2.5: accept_len 2.1 at k = 6 means alpha ~ 0.529.
    alpha = alpha_from_accept_len(2.1, 6)
    assert accept_len_from_alpha(alpha, 6) == pytest.approx(2.1, rel=1e-12)
    assert alpha == pytest.approx(0.52936, abs=1e-5)


def test_arrays_broadcast_through_the_same_formula():
    a = np.linspace(0, 1, 11)
    k = np.arange(1, 9)[:, None]
    grid = accept_len_from_alpha(a, k)
    assert grid.shape == (8, 11)
    for i, kk in enumerate(range(1, 9)):
        for j, aa in enumerate(a):
            assert grid[i, j] == pytest.approx(accept_len_from_alpha(float(aa), kk), rel=1e-14)
    back = alpha_from_accept_len(grid, k)
    np.testing.assert_allclose(back, np.broadcast_to(a, grid.shape), atol=1e-9)


def test_scalar_in_scalar_out():
    assert isinstance(accept_len_from_alpha(0.5, 3), float)
    assert isinstance(alpha_from_accept_len(2.0, 3), float)


def test_per_position_vllm_sample():
    # vLLM PR 24127 (facebook/opt-125m, ngram k=5) printed these per-position rates with
    # "Mean acceptance length: 5.44": 1 + sum(rates) must give it back.
    rates = [0.983, 0.949, 0.915, 0.881, 0.712]
    assert accept_len_from_per_position(rates) == pytest.approx(5.44, abs=1e-9)
    assert accept_len_from_per_position(np.array(rates)) == pytest.approx(5.44, abs=1e-9)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: accept_len_from_alpha(1.2, 3), "alpha: got 1.2, expected a probability in [0, 1]"),
        (lambda: accept_len_from_alpha(-0.1, 3), "alpha: got -0.1"),
        (lambda: accept_len_from_alpha(float("nan"), 3), "alpha: got nan"),
        (lambda: accept_len_from_alpha(0.5, 0), "k: got 0, expected a whole number"),
        (lambda: accept_len_from_alpha(0.5, 2.5), "k: got 2.5"),
        (lambda: alpha_from_accept_len(0.9, 3), "accept_len: got 0.9, expected a mean acceptance"),
        (lambda: alpha_from_accept_len(4.5, 3), "expected at most k + 1 = 4 for k = 3"),
        (lambda: accept_len_from_alpha(np.array([0.5, 2.0]), 3), "alpha: got 2.0"),
        (lambda: accept_len_from_per_position([0.5, 0.7]), "rate at position 2 (0.7) exceeds"),
        (lambda: accept_len_from_per_position([]), "per_position: got no rates"),
        (lambda: accept_len_from_per_position([1.5]), "per_position: got 1.5"),
        (lambda: accept_len_from_alpha("x", 3), "alpha: got 'x', expected a number"),
    ],
)
def test_bad_input_is_a_value_error_naming_the_argument(call, message):
    with pytest.raises(BreakevenError) as info:
        call()
    assert isinstance(info.value, ValueError)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_accept_len_allows_two_decimal_rounding_above_k_plus_one():
    # Engines print accept_len to two decimals: 6.004 at k = 5 is a rounded 6.
    assert alpha_from_accept_len(6.004, 5) == 1.0
