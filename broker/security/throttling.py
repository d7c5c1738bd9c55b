"""Client quotas enforced on this broker (Kafka's QuotaFactory: produce, fetch and request quotas), from the
metadata image's ClientQuotaRecords; the rates and throttle times are cluster/quotas.py's.

A request over its client's quota is answered at once with ``throttle_time_ms`` set, then the connection reads
nothing more for that long (KIP-219: the client backs off too). A consumer fetch or share fetch over its byte rate
or its ``request_percentage`` is answered without records (its bytes taken back from the rate, as Kafka's
unrecordQuotaSensor) so the data is not sent twice. Follower fetches and WriteTxnMarkers are exempt. A request's
time from its handler's start until its own work ended counts against ``request_percentage`` (Kafka's
requestThreadTimeNanos, until KafkaApis.handle returns): a handler marks the end before what Kafka hands to a
purgatory, a coordinator or the controller (``RequestContext.park``: a long poll, a rebalance, a commit's write,
acks=all's replication, a forwarded request) and sets aside waits Kafka's handler does not make
(``RequestContext.aside``: a ShareFetch's acknowledgements). It is recorded once: by Fetch, ShareFetch and Produce
in their response callbacks (Produce not at all with acks=0), else by dispatch after the handler. Fetch, ShareFetch
and Produce answer the larger of their byte-rate and request throttle times and throttle the connection on that
quota only. A Produce's bytes too are recorded in its response callback, after the append, as Kafka's; since the
connection reads ahead (Kafka reads a connection's next request only once the previous one is answered), a
produce of a client under a produce quota holds the connection's later requests until then (``_hold`` in
k00_produce), so those a producer pipelined behind it wait out its throttle.
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
