"""NWS-style forecasters: the predictor with the least recent error wins."""

import pytest

from emulator.coordinator.forecast import Forecaster, PairForecasts


def test_steady_series_is_forecast_exactly():
    f = Forecaster()
    for _ in range(12):
        f.update(42.0)
    value, error, _ = f.forecast()
    assert value == 42.0 and error == 0.0


def test_level_shift_is_followed_by_the_fast_predictors():
    f = Forecaster()
    for _ in range(30):
        f.update(100.0)
    for _ in range(6):
        f.update(25.0)
    value, error, name = f.forecast()
    assert value == pytest.approx(25.0, abs=1.0)
    assert name in ("last", "median5", "smooth0.5")


def test_noisy_series_prefers_averaging():
    f = Forecaster()
    for i in range(40):
        f.update(50.0 + (10.0 if i % 2 else -10.0))  # alternating 40, 60
    value, error, name = f.forecast()
    assert name != "last"  # the last value is always 20 off
    assert abs(value - 50.0) < 5 and error < 20


def test_error_is_reported_once_scored():
    f = Forecaster()
    f.update(10.0)
    assert f.forecast() == (10.0, None, "last")
    f.update(20.0)
    assert f.forecast()[1] == 10.0
    with pytest.raises(ValueError):
        Forecaster().forecast()


def test_pairs_are_unordered():
    p = PairForecasts()
    p.update("a", "b", 30.0)
    assert p.forecast("b", "a")[0] == 30.0
