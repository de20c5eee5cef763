"""The one measurement loop, and the layers on it: A/B pairs, stages, MQTT."""
