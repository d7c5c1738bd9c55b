"""The metadata control plane's broker side: the controller's handlers (``controller_apis``: Kafka's
ControllerApis, pure decisions run on the active controller), the controller listener's table
(``controller_listener``: those handlers, the KRaft RPCs, DescribeQuorum, Envelope) and the one way a broker asks
for a metadata change (``controller_channel``: Kafka's ForwardingManager and NodeToControllerChannel).

Named ``controlplane`` so that it never reads as ``cluster.controller``, the controller's state machine.
"""
