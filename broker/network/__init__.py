"""The node's network: the server that reads frames and answers requests in order (``server``), the one handler
table (``registry``) and the route to it (``dispatch``), writing responses with sendfile (``sendfile``), and the
other direction, this node's connections to its peers (``node_client``, reached only through ``peer_links``, the
test-only fault hook's one seam) and a one-shot blocking request for tools (``blocking_request``).
"""
