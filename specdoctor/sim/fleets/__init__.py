"""Built-in simulated fleets (YAML), laid out by `specdoctor.sim.fleet`."""
