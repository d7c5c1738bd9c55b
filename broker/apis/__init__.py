"""One module per API key (``kNN_name.py``); ``HANDLERS`` is the only table of what the broker serves."""

from broker.apis import k03_metadata, k18_api_versions
from broker.registry import build_table

HANDLERS = build_table([
    k03_metadata,
    k18_api_versions,
])
