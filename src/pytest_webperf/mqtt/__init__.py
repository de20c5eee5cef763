"""MQTT at QoS 2: what the swarm publishes, who receives it, and where every message went."""
