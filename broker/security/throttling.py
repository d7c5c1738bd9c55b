"""Client quotas enforced on this broker (Kafka's QuotaFactory: produce, fetch and request quotas), from the
metadata image's ClientQuotaRecords; the rates and throttle times are cluster/quotas.py's.

A request over its client's quota is answered at once with ``throttle_time_ms`` set, then the connection reads
nothing more for that long (KIP-219: the client backs off too). A consumer fetch over its byte rate or its
``request_percentage`` is answered empty (its bytes taken back from the rate, as Kafka's unrecordQuotaSensor) so the
data is not sent twice. Follower fetches are exempt. A request's time from its handler's start until it answered or
parked (Kafka's requestThreadTimeNanos: a long poll's wait is not the client's) counts against
``request_percentage``, once: by the Fetch handler itself, else by dispatch after the handler.
"""

from __future__ import annotations

from cluster.metadata_image import MetadataImage
from cluster.quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE, ClientQuotaManager


def user_of(principal: str) -> str:
    """The quota ``user`` of a principal (``User:alice`` -> ``alice``)."""
    return principal.partition(":")[2] or principal


class ClientQuotas:
    def __init__(self, window_num: int = 11, window_size_s: int = 1) -> None:
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, window_num, window_size_s)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, window_num, window_size_s)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, window_num, window_size_s)

    async def on_new_metadata_image(self, image: MetadataImage) -> None:
        """Publisher step: the image's quotas (unchanged ones keep their mapping, so this costs nothing)."""
        for manager in (self.produce, self.fetch, self.request):
            manager.update(image.client_quotas)
