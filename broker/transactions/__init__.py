"""The transaction coordinator's adapter: the markers it sends to partition leaders (marker_sender)."""
