"""The target's and the generator's resources, sampled while a run is measured."""
