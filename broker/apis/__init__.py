"""One module per API key (``kNN_name.py``); ``HANDLERS`` is the only table of what the broker serves."""

from broker.apis import (
    k00_produce, k01_fetch, k02_list_offsets, k03_metadata, k10_find_coordinator, k18_api_versions,
    k19_create_topics, k20_delete_topics, k22_init_producer_id,
)
from broker.registry import build_table

HANDLERS = build_table([
    k00_produce,
    k01_fetch,
    k02_list_offsets,
    k03_metadata,
    k10_find_coordinator,
    k18_api_versions,
    k19_create_topics,
    k20_delete_topics,
    k22_init_producer_id,
])
