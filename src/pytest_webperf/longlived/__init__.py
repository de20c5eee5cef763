"""Long-lived message connections (WebSocket, server-sent events): what a stream swarm
does, where every message went, and the codecs the tests and test servers speak."""
