"""``stef report``: one self-contained HTML file of a results JSONL (inline CSS and SVG, no
script, no network), for a lead to mail around.

figures.py   what the report says, per app: counts, tiers, score quantiles, accuracy, errors,
             cost; the worst records; the reliability bins (pure functions of the records)
html.py      the page: every value escaped, the charts from :mod:`stef.calibrate.plot`
"""
