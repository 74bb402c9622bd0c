"""Predictions: job run times (Smith; Li et al.), and waits and start times by simulating the
scheduler forward.

Open ``runtime`` first (the predictors), then ``online`` (running them without seeing the
future), ``search`` (fitting them on a training prefix), ``evaluate`` (their errors),
``forward`` (start times from a scheduler snapshot), ``waitstate`` (waits from similar
states), ``waits`` (evaluating wait predictions) and ``starts`` (published start times per
group and user, with probe jobs). ``estimators`` and ``attributes`` serve them.
"""
