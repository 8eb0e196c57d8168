"""``stef calibrate``: how often the judge agrees with human labels (SPEC §5, issue 6).

Every labelled record goes through the same pipeline as production traffic; the judge predicts
"correct" when the score is at or above the pass threshold. The positive class is **correct**
(label ``true``): sensitivity is the share of correct SQL the judge passes, specificity the share
of wrong SQL it fails.

A record the judge could not score -- outcome ``judge_error``, or a line that is invalid input --
is a wrong prediction, never dropped: a judge error on a correct item is a false negative, on a
wrong item a false positive. Dropping them would flatter a judge that fails on the hard cases.

Cohen's κ is reported only where both label classes occur: with one class, κ is 0 or undefined
whatever the judge does (per error type, every item is wrong), so it says nothing; read
specificity there instead.

The modules, in the order a run uses them: :mod:`stef.calibrate.labels` reads and judges the
labelled records, :mod:`stef.calibrate.agreement` computes the statistics,
:mod:`stef.calibrate.report` lays them out, :mod:`stef.calibrate.plot` draws the charts (SVG).
"""
