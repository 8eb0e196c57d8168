"""Human review of results: the records a reviewer reads, the labels file, the review page.

records.py    results JSONL (and the input log) as the reviewer's records, the review queue
labels.py     the labels file: appended under a lock, fsynced, read back (last label wins)
sqlview.py    SQL formatted and split into highlight spans (data, never markup)
server.py     ``stef review``: the page and its small JSON API on 127.0.0.1
"""
