"""Predictions: job run times (Smith; Li et al.), and waits and start times by simulating the
scheduler forward.

Open ``runtime`` first (the predictors), then ``online`` (running them without seeing the
future), ``search`` (fitting them on a training prefix), ``evaluate`` (their errors),
``forward`` (start times from a scheduler snapshot), ``waitstate`` (waits from similar
states), ``waits`` (evaluating wait predictions) and ``starts`` (published start times per
group and user, with probe jobs). ``estimators`` and ``attributes`` serve them.
"""

# The run-time predictors by name (defined here, not in ``evaluate``, so that a command can
# check a name without importing what the predictors need)
PREDICTORS = ("requested", "last2", "smith", "ibl", "smith-sq", "ibl-sq", "li-temp-est",
              "li-lsterr", "li-aver")


def is_predictor(name):
    """True for a predictor's name, or several joined by ``+`` (the mean of their
    predictions)."""
    return all(part in PREDICTORS for part in name.split("+"))
